// PredicateFormatter: prints predicate and expression trees as canonical format
// strings.
//
// Canonical means: parsing the output gives back an equal tree (for every tree the
// parser or the builder produces; NaN constants are the one exception, since NaN is
// not equal to itself). Keywords are upper case, strings are double-quoted,
// operators use one spelling (`==`, `!=`, `<=`, `>=`), `SOME` prints as `ANY`,
// reserved words used as keys print as `#word`, and keys that are not identifiers
// print with `\uXXXX` escapes. Nested AND/OR operands are always parenthesized.

extension KuraPredicate: CustomStringConvertible {
    /// The canonical format string of this predicate; `KuraPredicate(format:)` on it
    /// gives back an equal predicate.
    public var predicateFormat: String { PredicateFormatter.format(self) }

    /// Same as ``predicateFormat``.
    public var description: String { predicateFormat }
}

extension KuraExpression: CustomStringConvertible {
    /// The canonical format string of this expression; `KuraExpression(format:)` on it
    /// gives back an equal expression.
    public var expressionFormat: String { PredicateFormatter.format(self, minimumLevel: 0) }

    /// Same as ``expressionFormat``.
    public var description: String { expressionFormat }
}

enum PredicateFormatter {
    /// Binding level of postfix/primary expressions, and of prefix operators.
    private static let primaryLevel = 10
    private static let unaryLevel = 9

    static func format(_ p: KuraPredicate) -> String {
        switch p {
        case .truePredicate: return "TRUEPREDICATE"
        case .falsePredicate: return "FALSEPREDICATE"
        case .comparison(let c):
            var s = c.quantifier == .direct ? "" : c.quantifier.rawValue + " "
            s += format(c.left, minimumLevel: 0)
            s += " " + c.operator.rawValue
            if !c.options.isEmpty { s += "[" + c.options.letters + "]" }
            s += " " + format(c.right, minimumLevel: 0)
            return s
        case .and(let operands):
            if operands.isEmpty { return "TRUEPREDICATE" }
            return operands.map(compoundOperand).joined(separator: " AND ")
        case .or(let operands):
            if operands.isEmpty { return "FALSEPREDICATE" }
            return operands.map(compoundOperand).joined(separator: " OR ")
        case .not(let operand):
            return "NOT " + compoundOperand(operand)
        }
    }

    private static func compoundOperand(_ p: KuraPredicate) -> String {
        switch p {
        case .and, .or: return "(" + format(p) + ")"
        default: return format(p)
        }
    }

    /// The binding level of an expression's printed form.
    private static func level(_ e: KuraExpression) -> Int {
        switch e {
        case .binary(let op, _, _): return op.precedence
        case .function(let f, let args) where f.isSetOperation && args.count == 2: return 0
        case .unary: return unaryLevel
        case .constant(.integer(let i)) where i < 0: return unaryLevel
        case .constant(.double(let d)) where d.sign == .minus && !d.isNaN: return unaryLevel
        default: return primaryLevel
        }
    }

    static func format(_ e: KuraExpression, minimumLevel: Int) -> String {
        let s = formatBare(e)
        return level(e) < minimumLevel ? "(" + s + ")" : s
    }

    private static func formatBare(_ e: KuraExpression) -> String {
        switch e {
        case .keyPath(let keys):
            return keys.isEmpty ? "SELF" : keys.map(formatKey).joined(separator: ".")
        case .constant(let v):
            return formatConstant(v)
        case .date(let seconds):
            return "CAST(" + formatDouble(seconds) + ", \"NSDate\")"
        case .variable(let name):
            return "$" + name
        case .member(let base, let keys):
            return format(base, minimumLevel: primaryLevel) + "." + keys.map(formatKey).joined(separator: ".")
        case .variableKeyPath(let base, let variable):
            return format(base, minimumLevel: primaryLevel) + ".$" + variable
        case .aggregate(let items):
            return "{" + items.map { format($0, minimumLevel: 0) }.joined(separator: ", ") + "}"
        case .index(let base, let index):
            let inner: String
            switch index {
            case .first: inner = "FIRST"
            case .last: inner = "LAST"
            case .size: inner = "SIZE"
            case .expression(let x): inner = format(x, minimumLevel: 0)
            }
            return format(base, minimumLevel: primaryLevel) + "[" + inner + "]"
        case .function(let f, let args) where f.isSetOperation && args.count == 2:
            // Left-associative and looser than every arithmetic operator.
            return format(args[0], minimumLevel: 0) + " " + f.rawValue + " " + format(args[1], minimumLevel: 1)
        case .function(let f, let args):
            return f.rawValue + "(" + args.map { format($0, minimumLevel: 0) }.joined(separator: ", ") + ")"
        case .binary(let op, let l, let r):
            let p = op.precedence
            // Left-associative operators need parentheses around an equal-precedence
            // right operand; `**` (right-associative) around an equal left operand.
            let leftMin = op == .power ? p + 1 : p
            let rightMin = op == .power ? p : p + 1
            return format(l, minimumLevel: leftMin) + " " + op.rawValue + " " + format(r, minimumLevel: rightMin)
        case .unary(let op, let x):
            // A number directly after "-" would fold into a negative constant, so a
            // numeric operand keeps its parentheses.
            if case .constant(let v) = x, v.doubleValue != nil {
                return op.rawValue + "(" + formatConstant(v) + ")"
            }
            return op.rawValue + format(x, minimumLevel: unaryLevel)
        case .subquery(let collection, let variable, let predicate):
            return "SUBQUERY(" + format(collection, minimumLevel: 0) + ", $" + variable + ", " + format(predicate) + ")"
        case .cast(let x, let type):
            return "CAST(" + format(x, minimumLevel: 0) + ", \"" + type.rawValue + "\")"
        }
    }

    static func formatConstant(_ v: Value) -> String {
        switch v {
        case .null: return "NULL"
        case .bool(let b): return b ? "TRUE" : "FALSE"
        case .integer(let i): return String(i)
        case .double(let d): return formatDouble(d)
        case .text(let s): return quote(s)
        case .blob(let bytes):
            let hex = bytes.map { String($0, radix: 16).leftPadded(2) }.joined()
            return "CAST(\"" + hex + "\", \"NSData\")"
        }
    }

    static func formatDouble(_ d: Double) -> String {
        if d.isNaN { return "CAST(\"nan\", \"NSNumber\")" }
        if d.isInfinite { return d < 0 ? "-1e999" : "1e999" }
        return d.description
    }

    /// A double-quoted string literal with escapes the lexer reads back exactly.
    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += "\\u" + String(scalar.value, radix: 16, uppercase: true).leftPadded(4)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// A key as the lexer reads it back: bare, `#reserved`, `@operator`, or with
    /// `\uXXXX` escapes for characters that cannot appear in a name.
    static func formatKey(_ key: String) -> String {
        if key.hasPrefix("@"), key.count > 1 {
            return "@" + escapedName(String(key.dropFirst()))
        }
        if isPlainIdentifier(key) {
            return PredicateParser.reservedWords.contains(key.uppercased()) ? "#" + key : key
        }
        return escapedName(key)
    }

    private static func isPlainIdentifier(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first == "_" || first.properties.isXIDStart else { return false }
        return s.unicodeScalars.allSatisfy { $0 == "_" || $0.properties.isXIDContinue }
    }

    private static func escapedName(_ s: String) -> String {
        var out = ""
        var isFirst = true
        for scalar in s.unicodeScalars {
            let ok = scalar == "_" || (isFirst ? scalar.properties.isXIDStart : scalar.properties.isXIDContinue)
            if ok {
                out.unicodeScalars.append(scalar)
            } else if scalar.value > 0xFFFF {
                let v = scalar.value - 0x10000
                out += "\\u" + String(0xD800 + (v >> 10), radix: 16, uppercase: true)
                out += "\\u" + String(0xDC00 + (v & 0x3FF), radix: 16, uppercase: true)
            } else {
                out += "\\u" + String(scalar.value, radix: 16, uppercase: true).leftPadded(4)
            }
            isFirst = false
        }
        return out
    }
}
