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
// Synchronous work (Core Data's performAndWait): a BackgroundContext runs its
// jobs on a serial dispatch queue of its own (its actor executor,
// `QueueExecutor`), so `performAndWait` can run a closure on that queue with
// `queue.sync` and be on the actor (checkIsolated says so), blocking the
// caller until it is done. Called from the queue itself (from inside a
// `perform`), it runs the closure at once instead of deadlocking. A plain
// context has no queue: its `performAndWait` runs the closure on the calling
// thread, which must be the context's.
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
    private nonisolated let executor = QueueExecutor()

    /// The actor's jobs run on its own serial queue (see the header comment).
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(container: PersistentContainer) {
        self.container = container
        context = ManagedObjectContext(container: container)
    }

    /// Runs `body` with the context on this actor, blocking the calling
    /// thread until it returns (Core Data's `performAndWait`). Called from
    /// inside this actor's own work (a `perform` body), it runs at once.
    ///
    /// Thread rules: callable from any thread; do not call it from a thread
    /// the work waits for (the main thread while `body` waits for the main
    /// actor) — that deadlocks, as in Core Data. Unlike ``perform(_:)``, it
    /// does not wait for the view context to merge what `body` saved.
    ///
    /// - Throws: what `body` throws; changes it made stay in the context.
    public nonisolated func performAndWait<T: Sendable, E: Error>(_ body: sending (ManagedObjectContext) throws(E) -> T) throws(E) -> T {
        // `body` runs once, on the actor's queue, while the calling thread
        // waits in `queue.sync` (or is that queue): never two threads at once.
        nonisolated(unsafe) let work = body
        func run() -> Result<T, E> {
            assumeIsolated { actor -> Result<T, E> in
                do throws(E) { return .success(try work(actor.context)) } catch { return .failure(error) }
            }
        }
        let result = executor.isCurrent ? run() : executor.queue.sync { run() }
        return try result.get()
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

/// A serial executor on a dispatch queue (a BackgroundContext's).
final class QueueExecutor: SerialExecutor, @unchecked Sendable {
    // @unchecked Sendable: `queue` and `key` are immutable; DispatchQueue is thread-safe.
    let queue: DispatchQueue
    private let key = DispatchSpecificKey<UInt8>()

    init() {
        queue = DispatchQueue(label: "kura.background-context")
        queue.setSpecific(key: key, value: 1)
    }

    /// Whether the calling code runs on this executor's queue.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) != nil }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { unowned.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}

extension ManagedObjectContext {
    /// Runs `body` now, on the calling thread, and returns its result (Core
    /// Data's `performAndWait`, for code written against Core Data). A plain
    /// context is confined to the thread that uses it, so this is that
    /// thread; the ``PersistentContainer/viewContext``'s is the main actor.
    /// A ``BackgroundContext`` has its own ``BackgroundContext/performAndWait(_:)``
    /// that runs on its queue.
    ///
    /// - Throws: what `body` throws; changes it made stay in the context.
    public func performAndWait<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        try body()
    }
}
