// ContextActors: contexts isolated to actors, Core Data's main-queue and
// private-queue contexts in Swift 6 form (issue 11, "background work").
//
//   PersistentContainer.viewContext      one per container, isolated to the
//                                        main actor (use it from @MainActor code:
//                                        a UI, its fetched-results controllers);
//   PersistentContainer.newBackgroundContext()
//                                        a `BackgroundContext` actor that owns a
//                                        context; work runs in `perform { }`;
//   PersistentContainer.performBackgroundTask { }
//                                        a fresh context on a background task;
//   PersistentContainer.newContext()     a plain context confined to the thread
//                                        that uses it (no actor).
//
// Merging. A context with an executor (the view context, a BackgroundContext)
// that merges automatically gets *push* merging: when another context (or
// process) saves, a merge is scheduled on its actor (a main-actor task, a task
// on the BackgroundContext), which merges the saves and posts the
// objects-did-change batch there, so observers and a UI update without the app
// calling anything. A plain context keeps *pull* merging: the saves wait in
// its inbox until its next fetch, save, processPendingChanges() or
// mergePendingChanges() on its thread (Context+Merge.swift).
//
// Ordering (na_ios's "merge, then the completion"): `performBackgroundTask`
// and `BackgroundContext.perform` return only after the view context, if it
// merges automatically, has merged what was saved so far (they hop to the
// main actor when its inbox is not empty). Code after the `await` therefore
// sees the background saves in the view context and its observers have heard
// of them.
//
// No cycles: the container keeps its view context, which does not keep the
// container (ManagedObjectContext.init(borrowing:)); push closures hold the
// view context's slot or the BackgroundContext weakly.

import Foundation
import KuraEngine

/// Holds the container's view context on the main actor.
@MainActor
final class ViewContextSlot {
    var context: ManagedObjectContext?
    /// The view context's inbox while it merges automatically (readable off
    /// the main actor: background work checks it before hopping there).
    nonisolated let inbox = InboxReference()

    nonisolated init() {}
}

/// A `MergeInbox?` readable from any thread.
final class InboxReference: @unchecked Sendable {
    // @unchecked Sendable: `stored` is read and written only with `lock` held.
    private let lock = NSLock()
    private var stored: MergeInbox?

    var value: MergeInbox? {
        get {
            lock.lock()
            defer { lock.unlock() }
            return stored
        }
        set {
            lock.lock()
            stored = newValue
            lock.unlock()
        }
    }
}

extension PersistentContainer {
    /// The container's main-actor context (Core Data's `viewContext`): made
    /// on first use, then the same context for the container's lifetime.
    /// Use it, and its objects, only on the main actor.
    ///
    /// Set its ``ManagedObjectContext/automaticallyMergesChangesFromStore``
    /// to have other contexts' and processes' saves merged into it by push:
    /// the merge runs in a main-actor task scheduled when the save commits,
    /// and its objects-did-change batch is delivered there, on the main
    /// actor. Its did-save notifications come on the main actor (its saves
    /// run there).
    ///
    /// Lifetime: the container keeps its view context; the view context does
    /// not keep the container (keep the container while you use it).
    @MainActor
    public var viewContext: ManagedObjectContext {
        if let c = viewSlot.context { return c }
        let c = ManagedObjectContext(borrowing: self)
        let slot = viewSlot
        c.pushMerge = { Task { @MainActor in slot.context?.mergePushed() } }
        c.onAutoMergeChange = { slot.inbox.value = $0 }
        slot.context = c
        return c
    }

    /// A new context isolated to an actor of its own (Core Data's
    /// `newBackgroundContext()`): imports and saves run off the main actor,
    /// in ``BackgroundContext/perform(_:)``.
    public func newBackgroundContext() -> BackgroundContext { BackgroundContext(container: self) }

    /// Runs `body` with a new context on a background task and returns its
    /// result (Core Data's `performBackgroundTask`). The context lives for
    /// the call; `body` saves it if it wants its changes kept.
    ///
    /// When this returns, the ``viewContext`` (if it merges automatically)
    /// has merged what `body` saved and posted its change batch, so code
    /// after the `await` sees the changes there.
    ///
    /// - Throws: what `body` throws (then the view context is not waited for).
    public func performBackgroundTask<T: Sendable>(_ body: @escaping @Sendable (ManagedObjectContext) throws -> T) async throws -> T {
        let result = try await Task.detached { [self] in try body(newContext()) }.value
        await settleViewContext()
        return result
    }

    /// Merges the saves waiting for the view context now, on the main actor,
    /// if it merges automatically and something waits (no hop otherwise).
    func settleViewContext() async {
        guard let inbox = viewSlot.inbox.value, !inbox.isEmpty else { return }
        let slot = viewSlot
        await MainActor.run { slot.context?.mergePushed() }
    }
}

/// A context isolated to an actor of its own (Core Data's private-queue
/// context). Reach the context inside ``perform(_:)``; its objects never
/// leave the actor (pass ``ManagedObjectID``s, which are `Sendable`).
///
/// Thread rules: everything the context does runs on this actor, including
/// the delivery of its notifications: objects-did-change batches and
/// did-saves posted by work in `perform` are delivered there, during the
/// call; with ``ManagedObjectContext/automaticallyMergesChangesFromStore``
/// on, saves of other contexts and processes are merged by push in a task
/// on this actor, which posts the batch there.
///
/// Lifetime: the context lives as long as this actor; a pending push merge
/// does not keep it alive.
public actor BackgroundContext {
    /// The container the context works on.
    public nonisolated let container: PersistentContainer
    private let context: ManagedObjectContext

    init(container: PersistentContainer) {
        self.container = container
        context = ManagedObjectContext(container: container)
    }

    /// Runs `body` with the context on this actor and returns its result
    /// (Core Data's `perform`). Returns after the ``PersistentContainer/viewContext``,
    /// if it merges automatically, has merged what `body` saved.
    ///
    /// Calls run one at a time while `body` runs; while one call waits for
    /// the view context, another may start (actors are reentrant at `await`).
    ///
    /// - Throws: what `body` throws; changes it made stay in the context
    ///   (unsaved) unless it rolled them back.
    public func perform<T: Sendable, E: Error>(_ body: sending (ManagedObjectContext) throws(E) -> T) async throws(E) -> T {
        if context.pushMerge == nil {
            context.pushMerge = { [weak self] in
                Task { await self?.mergePushed() }
            }
        }
        let result = try body(context)
        await container.settleViewContext()
        return result
    }

    private func mergePushed() { context.mergePushed() }
}
