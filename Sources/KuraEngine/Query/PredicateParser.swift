// PredicateParser: the NSPredicate format language, parsed into KuraPredicate and
// KuraExpression trees.
//
// GRAMMAR (keywords are case-insensitive; `#name` escapes a reserved word into a key)
//
//   predicate      := or
//   or             := and { ("OR" | "||") and }                  -- one n-ary node per chain
//   and            := not { ("AND" | "&&") not }
//   not            := ("NOT" | "!") not | primaryPred
//   primaryPred    := "TRUEPREDICATE" | "FALSEPREDICATE"
//                   | "(" predicate ")"                             -- tried first; see below
//                   | [ "ANY" | "SOME" | "ALL" | "NONE" ] comparison
//   comparison     := expression operator [ "[" options "]" ] expression
//                   | keyPathLike                                   -- bare key path: `k == TRUE`
//   operator       := "==" | "=" | "!=" | "<>" | "<" | "<=" | "=<" | ">" | ">=" | "=>"
//                   | BETWEEN | IN | CONTAINS | BEGINSWITH | ENDSWITH | LIKE | MATCHES
//   options        := letters from c d n l, in any order (case-insensitive)
//
//   expression     := binary(1) { ("UNION" | "INTERSECT" | "MINUS") binary(1) }  -- left-assoc., loosest
//   binary(p)      := unary { op binary(prec(op) + 1, or prec(op) for "**") }  where prec(op) >= p
//                     precedences: "|" 1, "^" 2, "&" 3, "<<" ">>" 4, "+" "-" 5, "*" "/" 6, "**" 7
//   unary          := "-" number                                    -- folded into a constant
//                   | ("-" | "~") unary | postfix
//   postfix        := primary { "." key | "[" index "]" }
//   key            := identifier | "@"identifier | %K | $variable  -- reserved words allowed after "."
//   index          := FIRST | LAST | SIZE | expression
//   primary        := number | string | %@ %d %f ... | %K | $variable | "@"identifier
//                   | NULL | NIL | TRUE | YES | FALSE | NO | SELF
//                   | "(" expression ")" | "{" [ expression { "," expression } ] "}"
//                   | SUBQUERY "(" expression "," $variable "," predicate ")"
//                   | CAST "(" expression "," string ")"            -- NSNumber NSString NSDate NSData
//                   | FUNCTION "(" expression "," string { "," expression } ")"
//                   | name "(" [ expression { "," expression } ] ")" -- built-in functions
//                   | name ":" { name ":" } "(" [ arguments ] ")"   -- functions by selector
//                   | identifier                                    -- a key
//
// TOKENS: numbers are decimal (`12`, `2.5`, `9.2e-5`) or `0x1F`, `0o17`, `0b101`;
// strings are single- or double-quoted with escapes \\ \" \' \n \t \r \uXXXX \xXX \ooo
// (any other backslash stays as written, so regular expressions keep `\w`, `\d`, ...);
// identifiers are Unicode XID names and may contain \uXXXX escapes.
//
// DECISIONS
// - "(" at the start of a predicate is ambiguous: `(a < 1) AND b` versus
//   `(a + 1) * 2 < 3`. The parser tries `"(" predicate ")"` first and keeps it only
//   if the next token can follow a predicate; otherwise it re-parses from "(" as a
//   comparison. Failing both, it reports the error that got furthest. The retry
//   is bounded by the nesting limit, so parsing stays polynomial.
// - Unary minus binds tighter than `**` (`-2 ** 2` is 4).
// - FIRST, LAST and SIZE are keywords only inside "[ ]"; elsewhere they are keys.
// - Nesting deeper than `maxDepth` is a syntax error, so no input can overflow the
//   stack of the parser, the formatter or the evaluator.
// - A bare literal is not a predicate (`TRUE`, `1`, `0 || 1` are errors, as in
//   Foundation); a bare key path is (`hidden` means `hidden == TRUE`).
// - UNION, INTERSECT and MINUS are words only where an operator may stand (after
//   an operand); elsewhere they are keys. They bind more loosely than every
//   arithmetic operator: `a UNION b + c` is `a UNION (b + c)`.
// - Functions by selector (NSExpression's names): `sum:(xs)` ... `uppercase:(s)` are
//   the named functions; `add:to:`, `from:subtract:`, `multiply:by:`, `divide:by:`,
//   `raise:toPower:`, `bitwiseAnd:with:`, `bitwiseOr:with:`, `bitwiseXor:with:`,
//   `leftshift:by:`, `rightshift:by:` and `onesComplement:` parse to the operator
//   they name; `castObject:toType:` to CAST; `objectFrom:withIndex:` to `[ ]`;
//   `modulus:by:`, `random:` and `noindex:` are functions of their own.
// - FUNCTION(receiver, 'selector', args...) is accepted for the selectors that mean
//   something without Objective-C (see `methodSelectors`): Kura's function names
//   (`'uppercase'`) and NSString/NSNumber/NSArray methods with a built-in
//   equivalent (`'uppercaseString'`, `'count'`, `'stringValue'`, ...).
// - Unsupported but recognized: FUNCTION with any other selector (`'pow:'`), custom
//   selector operators (`self isKindOfClass: %@`), UTI-CONFORMS-TO and UTI-EQUALS (no
//   type-conformance table on Linux), ANYKEY, CAST to other classes, the
//   `distanceToLocation:fromLocation:` function, unknown function names. These throw
//   `KuraError.unsupported` naming the construct, with its offset.
//
// Error offsets are Character offsets into the format string.

extension KuraPredicate {
    /// Parses an NSPredicate format string, substituting `%@`, `%K`, `%d`, ... from
    /// `arguments` in order.
    ///
    /// - Throws: ``KuraError`` with code `.syntax` ("expected X but found Y", `offset`
    ///   is the Character offset of the problem), `.invalidArgument` (too few or too
    ///   many arguments, `%K` with a non-string, ...), or `.unsupported` (FUNCTION with
    ///   an Objective-C selector, `isKindOfClass:`, CAST to other classes).
    ///
    /// Arguments the format does not consume are ignored, as Foundation ignores
    /// them (Apple's `%K like '%@'` example passes a value the quoted `'%@'` never
    /// takes). Pass `requireAllArguments: true` to get `.invalidArgument` for them.
    public init(format: String, arguments: [PredicateArgument], requireAllArguments: Bool = false) throws(KuraError) {
        var lexer = PredicateLexer(format, arguments: arguments, requireAllArguments: requireAllArguments)
        var parser = PredicateParser(tokens: try lexer.tokenize())
        self = try parser.parseWholePredicate()
    }

    /// Parses an NSPredicate format string; see ``init(format:arguments:)``.
    ///
    ///     let p = try KuraPredicate(format: "%K BEGINSWITH[cd] %@ AND age > %d", "name", "a", 30)
    public init(format: String, _ arguments: PredicateArgument...) throws(KuraError) {
        try self.init(format: format, arguments: arguments)
    }
}

extension KuraExpression {
    /// Parses one expression in the format language (`"age + 1"`, `"@sum.price"`).
    ///
    /// - Throws: ``KuraError`` as ``KuraPredicate/init(format:arguments:)`` does.
    public init(format: String, arguments: [PredicateArgument] = [], requireAllArguments: Bool = false) throws(KuraError) {
        var lexer = PredicateLexer(format, arguments: arguments, requireAllArguments: requireAllArguments)
        var parser = PredicateParser(tokens: try lexer.tokenize())
        self = try parser.parseWholeExpression()
    }
}

struct PredicateParser {
    /// The deepest nesting accepted (parentheses, operators, NOT, function calls, ...).
    static let maxDepth = 100

    private let tokens: [PredicateToken]
    private var position = 0
    private var depth = 0

    /// Results of parsing a SUBQUERY's predicate, by where it starts. The "(" retry
    /// can reach the same SUBQUERY twice, once per reading; without the memo,
    /// nested SUBQUERYs inside parentheses would take exponential time.
    private struct MemoKey: Hashable { var position: Int; var depth: Int }
    private var subqueryMemo: [MemoKey: Result<(KuraPredicate, Int), KuraError>] = [:]

    init(tokens: [PredicateToken]) {
        precondition(!tokens.isEmpty, "the lexer always ends with .end")
        self.tokens = tokens
    }

    static let reservedWords: Set<String> = [
        "AND", "OR", "IN", "NOT", "ALL", "ANY", "SOME", "NONE", "LIKE", "CASEINSENSITIVE", "CI",
        "MATCHES", "CONTAINS", "BEGINSWITH", "ENDSWITH", "BETWEEN", "NULL", "NIL", "SELF", "TRUE",
        "YES", "FALSE", "NO", "FIRST", "LAST", "SIZE", "ANYKEY", "SUBQUERY", "CAST",
        "TRUEPREDICATE", "FALSEPREDICATE",
    ]
    /// Reserved words that are nonetheless keys outside "[ ]".
    private static let contextualWords: Set<String> = ["FIRST", "LAST", "SIZE"]

    // MARK: Token helpers

    private var current: PredicateToken { tokens[position] }
    private func peekToken(_ ahead: Int) -> PredicateToken { tokens[Swift.min(position + ahead, tokens.count - 1)] }
    private mutating func advance() { if position < tokens.count - 1 { position += 1 } }

    private func error(expected: String, at token: PredicateToken? = nil) -> KuraError {
        let t = token ?? current
        return KuraError(.syntax, "expected \(expected) but found \(t.found)", offset: t.offset)
    }

    private mutating func expect(_ p: String) throws(KuraError) {
        guard current.isPunctuation(p) else { throw error(expected: "'\(p)'") }
        advance()
    }

    private mutating func enter() throws(KuraError) {
        depth += 1
        if depth > Self.maxDepth {
            throw KuraError(.syntax, "expected at most \(Self.maxDepth) levels of nesting but found more; simplify the predicate", offset: current.offset)
        }
    }
    private mutating func leave() { depth -= 1 }

    private func isKeyword(_ word: String) -> Bool { current.keyword == word }

    // MARK: Predicates

    mutating func parseWholePredicate() throws(KuraError) -> KuraPredicate {
        let p = try parseOr()
        guard case .end = current.kind else { throw error(expected: "AND, OR or end of input") }
        return p
    }

    mutating func parseWholeExpression() throws(KuraError) -> KuraExpression {
        let e = try parseExpression()
        guard case .end = current.kind else { throw error(expected: "an operator or end of input") }
        return e
    }

    private var atOr: Bool { isKeyword("OR") || current.isPunctuation("||") }
    private var atAnd: Bool { isKeyword("AND") || current.isPunctuation("&&") }

    private mutating func parseOr() throws(KuraError) -> KuraPredicate {
        var operands = [try parseAnd()]
        while atOr {
            advance()
            operands.append(try parseAnd())
        }
        return operands.count == 1 ? operands[0] : .or(operands)
    }

    private mutating func parseAnd() throws(KuraError) -> KuraPredicate {
        var operands = [try parseNot()]
        while atAnd {
            advance()
            operands.append(try parseNot())
        }
        return operands.count == 1 ? operands[0] : .and(operands)
    }

    private mutating func parseNot() throws(KuraError) -> KuraPredicate {
        if isKeyword("NOT") || current.isPunctuation("!") {
            try enter()
            advance()
            defer { leave() }
            return .not(try parseNot())
        }
        return try parsePrimaryPredicate()
    }

    /// True if the current token can follow a complete predicate.
    private var atPredicateFollow: Bool {
        if case .end = current.kind { return true }
        return atAnd || atOr || current.isPunctuation(")")
    }

    private mutating func parsePrimaryPredicate() throws(KuraError) -> KuraPredicate {
        if isKeyword("TRUEPREDICATE") { advance(); return .truePredicate }
        if isKeyword("FALSEPREDICATE") { advance(); return .falsePredicate }
        if current.isPunctuation("(") {
            let saved = (position, depth)
            var firstError: KuraError
            do throws(KuraError) {
                try enter()
                advance()
                let inner = try parseOr()
                try expect(")")
                leave()
                if atPredicateFollow { return inner }
                firstError = error(expected: "AND, OR, ')' or end of input")
            } catch {
                firstError = error
            }
            (position, depth) = saved
            do throws(KuraError) {
                return try parseComparison(quantifier: .direct)
            } catch {
                // Report whichever reading got further into the string.
                if (error.offset ?? 0) > (firstError.offset ?? 0) { throw error }
                throw firstError
            }
        }
        if let word = current.keyword {
            let quantifier: KuraQuantifier?
            switch word {
            case "ANY", "SOME": quantifier = .any
            case "ALL": quantifier = .all
            case "NONE": quantifier = .noneOf
            default: quantifier = nil
            }
            if let quantifier {
                advance()
                return try parseComparison(quantifier: quantifier)
            }
        }
        return try parseComparison(quantifier: .direct)
    }

    private static func isKeyPathLike(_ e: KuraExpression) -> Bool {
        switch e {
        case .keyPath, .member, .variable, .variableKeyPath, .index: return true
        default: return false
        }
    }

    private mutating func parseComparison(quantifier: KuraQuantifier) throws(KuraError) -> KuraPredicate {
        let left = try parseExpression()
        guard let op = try parseOperator() else {
            if quantifier == .direct, Self.isKeyPathLike(left) {
                return .comparison(KuraComparison(left, .equalTo, .constant(.bool(true))))
            }
            throw error(expected: "a comparison operator")
        }
        var options: KuraComparisonOptions = []
        if current.isPunctuation("[") {
            advance()
            options = try parseOptions()
            try expect("]")
        }
        let rightToken = current
        let right = try parseExpression()
        if op == .between, case .aggregate(let bounds) = right, bounds.count != 2 {
            throw KuraError(.syntax, "expected two bounds {lower, upper} after BETWEEN but found \(bounds.count)", offset: rightToken.offset)
        }
        return .comparison(KuraComparison(left, op, right, options: options, quantifier: quantifier))
    }

    private mutating func parseOperator() throws(KuraError) -> KuraComparisonOperator? {
        let t = current
        var op: KuraComparisonOperator?
        switch t.kind {
        case .punctuation(let p):
            switch p {
            case "==", "=": op = .equalTo
            case "!=", "<>": op = .notEqualTo
            case "<": op = .lessThan
            case "<=", "=<": op = .lessThanOrEqualTo
            case ">": op = .greaterThan
            case ">=", "=>": op = .greaterThanOrEqualTo
            default: op = nil
            }
        case .identifier(let name, let escaped):
            switch escaped ? "" : name.uppercased() {
            case "BETWEEN": op = .between
            case "IN": op = .in
            case "CONTAINS": op = .contains
            case "BEGINSWITH": op = .beginsWith
            case "ENDSWITH": op = .endsWith
            case "LIKE": op = .like
            case "MATCHES": op = .matches
            default:
                if peekToken(1).isPunctuation(":") {
                    throw KuraError(.unsupported, "custom selector operators such as '\(name):' are not supported; Kura cannot call Objective-C methods", offset: t.offset)
                }
                if name.uppercased() == "UTI", peekToken(1).isPunctuation("-") {
                    let spelled = peekToken(2).keyword == "EQUALS" ? "UTI-EQUALS" : "UTI-CONFORMS-TO"
                    throw KuraError(.unsupported, "the operator \(spelled) is not supported: Kura has no table of uniform type identifiers; compare the type strings with == or IN instead", offset: t.offset)
                }
                op = nil
            }
        default:
            op = nil
        }
        if op != nil { advance() }
        return op
    }

    private mutating func parseOptions() throws(KuraError) -> KuraComparisonOptions {
        guard case .identifier(let letters, false) = current.kind else {
            throw error(expected: "comparison options c, d or n")
        }
        var options: KuraComparisonOptions = []
        for (i, ch) in letters.enumerated() {
            switch ch {
            case "c", "C": options.insert(.caseInsensitive)
            case "d", "D": options.insert(.diacriticInsensitive)
            case "n", "N": options.insert(.normalized)
            case "l", "L": options.insert(.localeSensitive)
            default:
                throw KuraError(.syntax, "expected comparison option c, d or n but found '\(ch)'", offset: current.offset + i)
            }
        }
        advance()
        return options
    }

    // MARK: Expressions

    private mutating func parseExpression() throws(KuraError) -> KuraExpression {
        var left = try parseBinary(minimumPrecedence: 1)
        let entryDepth = depth
        defer { depth = entryDepth }
        while let op = currentSetOperator {
            advance()
            try enter()
            let right = try parseBinary(minimumPrecedence: 1)
            left = .function(op, [left, right])
        }
        return left
    }

    private var currentSetOperator: KuraFunction? {
        switch current.keyword {
        case "UNION": return .union
        case "INTERSECT": return .intersect
        case "MINUS": return .minus
        default: return nil
        }
    }

    private var currentBinaryOperator: KuraBinaryOperator? {
        guard case .punctuation(let p) = current.kind else { return nil }
        return KuraBinaryOperator(rawValue: p)
    }

    private mutating func parseBinary(minimumPrecedence: Int) throws(KuraError) -> KuraExpression {
        var left = try parseUnary()
        let entryDepth = depth
        defer { depth = entryDepth }
        while let op = currentBinaryOperator, op.precedence >= minimumPrecedence {
            advance()
            try enter()
            let right = try parseBinary(minimumPrecedence: op == .power ? op.precedence : op.precedence + 1)
            left = .binary(op, left, right)
        }
        return left
    }

    private mutating func parseUnary() throws(KuraError) -> KuraExpression {
        if current.isPunctuation("-") {
            if case .number(let n) = peekToken(1).kind,
               !peekToken(2).isPunctuation("."), !peekToken(2).isPunctuation("[") {
                advance(); advance()
                return .constant(n.value(negated: true))
            }
            advance()
            try enter()
            defer { leave() }
            return .unary(.negate, try parseUnary())
        }
        if current.isPunctuation("~") {
            advance()
            try enter()
            defer { leave() }
            return .unary(.bitwiseNot, try parseUnary())
        }
        return try parsePostfix()
    }

    private mutating func parsePostfix() throws(KuraError) -> KuraExpression {
        var base = try parsePrimary()
        let entryDepth = depth
        defer { depth = entryDepth }
        while true {
            if current.isPunctuation(".") {
                advance()
                switch current.kind {
                case .identifier(let name, _):
                    base = base.appending([name])
                case .atKey(let name):
                    base = base.appending([name])
                case .argumentKeyPath(let keys):
                    base = base.appending(keys)
                case .variable(let name):
                    try enter()
                    base = .variableKeyPath(base, variable: name)
                default:
                    throw error(expected: "a key after '.'")
                }
                advance()
            } else if current.isPunctuation("[") {
                advance()
                try enter()
                let index: KuraIndex
                if let word = current.keyword, Self.contextualWords.contains(word), peekToken(1).isPunctuation("]") {
                    index = word == "FIRST" ? .first : word == "LAST" ? .last : .size
                    advance()
                } else {
                    index = .expression(try parseExpression())
                }
                try expect("]")
                base = .index(base, index)
            } else {
                return base
            }
        }
    }

    private mutating func parsePrimary() throws(KuraError) -> KuraExpression {
        let t = current
        switch t.kind {
        case .number(let n):
            advance()
            return .constant(n.value(negated: false))
        case .string(let s):
            advance()
            return .constant(.text(s))
        case .argumentValue(let e):
            advance()
            return e
        case .argumentKeyPath(let keys):
            advance()
            return .keyPath(keys)
        case .variable(let name):
            advance()
            return .variable(name)
        case .atKey(let name):
            advance()
            return .keyPath([name])
        case .punctuation("("):
            try enter()
            advance()
            let e = try parseExpression()
            try expect(")")
            leave()
            return e
        case .punctuation("{"):
            try enter()
            advance()
            var items: [KuraExpression] = []
            if !current.isPunctuation("}") {
                items.append(try parseExpression())
                while current.isPunctuation(",") {
                    advance()
                    items.append(try parseExpression())
                }
            }
            guard current.isPunctuation("}") else { throw error(expected: "',' or '}'") }
            advance()
            leave()
            return .aggregate(items)
        case .identifier(let name, let escaped):
            if escaped {
                advance()
                return .keyPath([name])
            }
            let word = name.uppercased()
            switch word {
            case "NULL", "NIL": advance(); return .constant(.null)
            case "TRUE", "YES": advance(); return .constant(.bool(true))
            case "FALSE", "NO": advance(); return .constant(.bool(false))
            case "SELF": advance(); return .keyPath([])
            case "SUBQUERY": return try parseSubquery()
            case "CAST": return try parseCast()
            case "ANYKEY":
                throw KuraError(.unsupported, "ANYKEY (Spotlight's any-attribute expression) is not supported", offset: t.offset)
            default: break
            }
            if Self.reservedWords.contains(word), !Self.contextualWords.contains(word) {
                throw error(expected: "an expression (write #\(name) to use the reserved word as a key)")
            }
            if peekToken(1).isPunctuation("(") {
                if word == "FUNCTION" { return try parseFunctionExpression() }
                return try parseFunctionCall(name: name, token: t)
            }
            if peekToken(1).isPunctuation(":") { return try parseSelectorCall(token: t) }
            advance()
            return .keyPath([name])
        default:
            throw error(expected: "an expression")
        }
    }

    private mutating func parseArguments() throws(KuraError) -> [(KuraExpression, PredicateToken)] {
        try expect("(")
        try enter()
        var args: [(KuraExpression, PredicateToken)] = []
        if !current.isPunctuation(")") {
            let t = current
            args.append((try parseExpression(), t))
            while current.isPunctuation(",") {
                advance()
                let t = current
                args.append((try parseExpression(), t))
            }
        }
        guard current.isPunctuation(")") else { throw error(expected: "',' or ')'") }
        advance()
        leave()
        return args
    }

    /// Function names a user can call as `name(...)`.
    static var callableFunctionNames: String {
        KuraFunction.allCases.filter { !$0.isSetOperation }.map { $0.rawValue.hasSuffix(":") || $0.rawValue.contains(":") ? $0.rawValue + "(...)" : $0.rawValue }.joined(separator: ", ")
    }

    private mutating func parseFunctionCall(name: String, token: PredicateToken) throws(KuraError) -> KuraExpression {
        guard let function = KuraFunction(rawValue: name.lowercased()), !function.isSetOperation, !function.rawValue.contains(":") else {
            throw KuraError(.unsupported, "unknown function '\(name)'; Kura supports \(Self.callableFunctionNames)", offset: token.offset)
        }
        advance()
        let args = try parseArguments().map(\.0)
        try Self.checkArity(function, args.count, at: token)
        return .function(function, args)
    }

    private static func checkArity(_ function: KuraFunction, _ count: Int, at token: PredicateToken) throws(KuraError) {
        if let arity = function.arity {
            if count != arity {
                throw KuraError(.syntax, "expected \(arity) argument\(arity == 1 ? "" : "s") for \(function.rawValue)() but found \(count)", offset: token.offset)
            }
        } else if count == 0 {
            throw KuraError(.syntax, "expected at least 1 argument for \(function.rawValue)() but found 0", offset: token.offset)
        }
    }

    /// `name:name:(arguments)`: an NSExpression function written by its selector.
    private mutating func parseSelectorCall(token: PredicateToken) throws(KuraError) -> KuraExpression {
        var selector = ""
        while case .identifier(let part, _) = current.kind, peekToken(1).isPunctuation(":") {
            selector += part + ":"
            advance(); advance()
        }
        guard current.isPunctuation("(") else { throw error(expected: "'(' after the function selector '\(selector)'") }
        let args = try parseArguments()
        let values = args.map(\.0)
        func arity(_ n: Int) throws(KuraError) {
            if values.count != n {
                throw KuraError(.syntax, "expected \(n) argument\(n == 1 ? "" : "s") for \(selector) but found \(values.count)", offset: token.offset)
            }
        }
        let binary: [String: KuraBinaryOperator] = [
            "add:to:": .add, "from:subtract:": .subtract, "multiply:by:": .multiply, "divide:by:": .divide,
            "raise:topower:": .power, "bitwiseand:with:": .bitwiseAnd, "bitwiseor:with:": .bitwiseOr,
            "bitwisexor:with:": .bitwiseXor, "leftshift:by:": .leftShift, "rightshift:by:": .rightShift,
        ]
        let lower = selector.lowercased()
        if let op = binary[lower] {
            try arity(2)
            return .binary(op, values[0], values[1])
        }
        switch lower {
        case "onescomplement:":
            try arity(1)
            return .unary(.bitwiseNot, values[0])
        case "castobject:totype:":
            try arity(2)
            guard case .constant(.text(let typeName)) = values[1] else {
                throw error(expected: "a class name string such as 'NSNumber'", at: args[1].1)
            }
            return try Self.cast(values[0], typeName: typeName, at: args[1].1)
        case "objectfrom:withindex:":
            try arity(2)
            return .index(values[0], .expression(values[1]))
        case "distancetolocation:fromlocation:":
            throw KuraError(.unsupported, "the function distanceToLocation:fromLocation: is not supported: it needs CoreLocation objects", offset: token.offset)
        default:
            break
        }
        // One-argument selectors name the functions: `sum:(xs)`, `modulus:by:(a, b)`, ...
        let name = selector.split(separator: ":").count == 1 && KuraFunction(rawValue: lower) == nil ? String(lower.dropLast()) : lower
        guard let function = KuraFunction(rawValue: name), !function.isSetOperation, function.arity != 0 else {
            throw KuraError(.unsupported, "unknown function '\(selector)'; Kura supports \(Self.callableFunctionNames) and NSExpression's selector names for them", offset: token.offset)
        }
        try Self.checkArity(function, values.count, at: token)
        return .function(function, values)
    }

    /// FUNCTION(receiver, 'selector', arguments): the selectors with a meaning that
    /// does not need Objective-C, each turned into the equivalent built-in tree.
    static let methodSelectors = ["uppercaseString", "lowercaseString", "count", "firstObject", "lastObject",
                                  "stringValue", "description", "doubleValue", "floatValue", "intValue", "integerValue",
                                  "longValue", "longLongValue", "objectAtIndex:", "valueForKey:", "valueForKeyPath:"]

    private mutating func parseFunctionExpression() throws(KuraError) -> KuraExpression {
        advance()
        try expect("(")
        try enter()
        let receiver = try parseExpression()
        guard current.isPunctuation(",") else { throw error(expected: "',' and a selector string") }
        advance()
        let selectorToken = current
        let selectorExpression = try parseExpression()
        guard case .constant(.text(let selector)) = selectorExpression else {
            throw error(expected: "a selector string such as 'uppercase'", at: selectorToken)
        }
        var extra: [KuraExpression] = []
        while current.isPunctuation(",") {
            advance()
            extra.append(try parseExpression())
        }
        try expect(")")
        leave()
        let colons = selector.filter { $0 == ":" }.count
        if colons != extra.count {
            throw KuraError(.syntax, "expected \(colons) argument\(colons == 1 ? "" : "s") after the selector '\(selector)' but found \(extra.count)", offset: selectorToken.offset)
        }
        if colons == 0, let function = KuraFunction(rawValue: selector), function.arity == 1 || function.arity == nil {
            return .function(function, [receiver])
        }
        switch selector {
        case "uppercaseString": return .function(.uppercase, [receiver])
        case "lowercaseString": return .function(.lowercase, [receiver])
        case "count": return receiver.appending(["@count"])
        case "firstObject": return .index(receiver, .first)
        case "lastObject": return .index(receiver, .last)
        case "stringValue", "description": return .cast(receiver, .string)
        case "doubleValue", "floatValue": return .cast(receiver, .number)
        case "intValue", "integerValue", "longValue", "longLongValue": return .function(.trunc, [.cast(receiver, .number)])
        case "objectAtIndex:": return .index(receiver, .expression(extra[0]))
        case "valueForKey:", "valueForKeyPath:":
            guard case .constant(.text(let path)) = extra[0] else {
                throw KuraError(.unsupported, "FUNCTION(x, '\(selector)', key) needs a constant key string", offset: selectorToken.offset)
            }
            return receiver.appending(path.split(separator: ".").map(String.init))
        default:
            throw KuraError(.unsupported, "FUNCTION with the selector '\(selector)' is not supported; Kura cannot call Objective-C methods. It understands \(Self.methodSelectors.map { "'\($0)'" }.joined(separator: ", ")) and its own function names such as 'uppercase'", offset: selectorToken.offset)
        }
    }

    private mutating func parseSubquery() throws(KuraError) -> KuraExpression {
        advance()
        try expect("(")
        try enter()
        let collection = try parseExpression()
        try expect(",")
        guard case .variable(let variable) = current.kind else {
            throw error(expected: "a variable such as $x")
        }
        advance()
        try expect(",")
        let key = MemoKey(position: position, depth: depth)
        let predicate: KuraPredicate
        if let memo = subqueryMemo[key] {
            let (p, end) = try memo.get()
            predicate = p
            position = end
        } else {
            do throws(KuraError) {
                predicate = try parseOr()
                subqueryMemo[key] = .success((predicate, position))
            } catch {
                subqueryMemo[key] = .failure(error)
                throw error
            }
        }
        try expect(")")
        leave()
        return .subquery(collection: collection, variable: variable, predicate: predicate)
    }

    private mutating func parseCast() throws(KuraError) -> KuraExpression {
        advance()
        try expect("(")
        try enter()
        let operand = try parseExpression()
        try expect(",")
        let typeToken = current
        let typeExpression = try parseExpression()
        try expect(")")
        leave()
        guard case .constant(.text(let typeName)) = typeExpression else {
            throw error(expected: "a class name string such as 'NSNumber'", at: typeToken)
        }
        return try Self.cast(operand, typeName: typeName, at: typeToken)
    }

    private static func cast(_ operand: KuraExpression, typeName: String, at typeToken: PredicateToken) throws(KuraError) -> KuraExpression {
        guard let type = KuraCastType(rawValue: typeName) else {
            throw KuraError(.unsupported, "CAST to '\(typeName)' is not supported; use NSNumber, NSString, NSDate or NSData", offset: typeToken.offset)
        }
        switch (type, operand) {
        case (.date, .constant(.integer(let i))): return .date(secondsSinceReferenceDate: Double(i))
        case (.date, .constant(.double(let d))): return .date(secondsSinceReferenceDate: d)
        case (.data, .constant(.text(let hex))):
            guard let bytes = decodeHex(hex) else {
                throw KuraError(.syntax, "expected an even number of hexadecimal digits for CAST(..., 'NSData') but found '\(hex)'", offset: typeToken.offset)
            }
            return .constant(.blob(bytes))
        default:
            return .cast(operand, type)
        }
    }

    static func decodeHex(_ s: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var high: UInt8?
        for c in s.unicodeScalars {
            guard let d = UInt8(String(c), radix: 16) else { return nil }
            if let h = high { bytes.append(h << 4 | d); high = nil } else { high = d }
        }
        return high == nil ? bytes : nil
    }
}
