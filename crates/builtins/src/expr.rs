//! The calculator's expression language: a tokenizer, a recursive-descent parser with bounded
//! length and nesting, and an evaluator that refuses division by zero and non-finite results.
//!
//! Grammar (lowest precedence first):
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/' | '%') unary)*
//! unary   := ('+' | '-') unary | power
//! power   := primary ('^' unary)?          right-associative; binds tighter than unary minus
//! primary := number | constant | function '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! So `-2^2` is `-(2^2)` = -4, `2^3^2` is `2^(3^2)` = 512 and `2^-1` is 0.5. `**` is accepted as
//! `^`, and the typographic `−`, `×` and `÷` as `-`, `*` and `/`. Names are case-insensitive.
//! Positions in messages count characters from 1.

use std::fmt;

/// Longest expression accepted, in characters.
pub const MAX_EXPRESSION_CHARS: usize = 4096;

/// Deepest nesting accepted: parentheses, function calls, signs and exponents each add a level.
pub const MAX_NESTING: usize = 64;

/// Whether an expression was malformed or its math failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CalcErrorKind {
    /// The expression is empty, too long, too deep or not well-formed.
    Syntax,
    /// The expression is well-formed but its value is undefined or not representable.
    Math,
}

/// Why an expression could not be evaluated; the message says what and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalcError {
    kind: CalcErrorKind,
    message: String,
}

impl CalcError {
    fn syntax(message: impl Into<String>) -> Self {
        Self {
            kind: CalcErrorKind::Syntax,
            message: message.into(),
        }
    }

    fn at(position: usize, problem: impl fmt::Display) -> Self {
        Self::syntax(format!(
            "Invalid expression at position {}: {problem}",
            position + 1
        ))
    }

    fn math(message: impl Into<String>) -> Self {
        Self {
            kind: CalcErrorKind::Math,
            message: message.into(),
        }
    }

    /// Syntax or math.
    pub fn kind(&self) -> CalcErrorKind {
        self.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for CalcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CalcError {}

/// Evaluates an arithmetic expression (see the module documentation for the language).
///
/// ```
/// use toolgate_builtins::evaluate;
/// assert_eq!(evaluate("2 + 3 * 4").unwrap(), 14.0);
/// assert_eq!(evaluate("-2^2").unwrap(), -4.0);
/// assert!(evaluate("1/0").is_err());
/// ```
pub fn evaluate(expression: &str) -> Result<f64, CalcError> {
    let length = expression.chars().count();
    if length > MAX_EXPRESSION_CHARS {
        return Err(CalcError::syntax(format!(
            "Expression is too long: {length} characters (at most {MAX_EXPRESSION_CHARS})"
        )));
    }
    if expression.trim().is_empty() {
        return Err(CalcError::syntax(
            "Expression is empty: give an arithmetic expression like 2 * (3 + 4)",
        ));
    }
    let src: Vec<char> = expression.chars().collect();
    let tokens = tokenize(&src)?;
    let mut parser = Parser {
        tokens: &tokens,
        next: 0,
        src: &src,
        depth: 0,
    };
    let tree = parser.expression()?;
    let trailing = parser.peek();
    if trailing.tok != Tok::End {
        return Err(parser.unexpected(trailing));
    }
    eval(&tree, &src)
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Clone, Copy, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Ident,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Caret,
    LParen,
    RParen,
    Comma,
    End,
}

#[derive(Clone, Copy, Debug)]
struct Token {
    tok: Tok,
    /// Char index of the first character.
    start: usize,
    /// Char index one past the last character.
    end: usize,
}

fn tokenize(src: &[char]) -> Result<Vec<Token>, CalcError> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(&c) = src.get(i) {
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let single = match c {
            '+' => Some(Tok::Plus),
            '-' | '\u{2212}' => Some(Tok::Minus),
            '*' | '\u{00d7}' => Some(Tok::Star),
            '/' | '\u{00f7}' => Some(Tok::Slash),
            '%' => Some(Tok::Percent),
            '^' => Some(Tok::Caret),
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            ',' => Some(Tok::Comma),
            _ => None,
        };
        if let Some(tok) = single {
            i += 1;
            let tok = if tok == Tok::Star && src.get(i) == Some(&'*') {
                i += 1;
                Tok::Caret
            } else {
                tok
            };
            tokens.push(Token { tok, start, end: i });
        } else if c.is_ascii_digit() || c == '.' {
            i = scan_number(src, i);
            let text: String = src.get(start..i).unwrap_or_default().iter().collect();
            if !text.bytes().any(|b| b.is_ascii_digit()) {
                return Err(CalcError::at(start, format!("unexpected '{text}'")));
            }
            let value: f64 = text
                .parse()
                .map_err(|_| CalcError::at(start, format!("invalid number '{text}'")))?;
            if !value.is_finite() {
                return Err(CalcError::at(
                    start,
                    format!("number '{text}' is too large (the largest is about 1.8e308)"),
                ));
            }
            tokens.push(Token {
                tok: Tok::Num(value),
                start,
                end: i,
            });
        } else if c.is_alphabetic() || c == '_' {
            while src.get(i).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
                i += 1;
            }
            tokens.push(Token {
                tok: Tok::Ident,
                start,
                end: i,
            });
        } else {
            return Err(CalcError::at(
                start,
                format!("unexpected character {}", quote_char(c)),
            ));
        }
    }
    tokens.push(Token {
        tok: Tok::End,
        start: src.len(),
        end: src.len(),
    });
    Ok(tokens)
}

/// Scans `digits [. digits] [e [+-] digits]` from `i`; returns the index after the literal.
/// An `e` not followed by an exponent is left alone (it is then the constant e).
fn scan_number(src: &[char], mut i: usize) -> usize {
    let digit = |i: usize| src.get(i).is_some_and(char::is_ascii_digit);
    while digit(i) {
        i += 1;
    }
    if src.get(i) == Some(&'.') {
        i += 1;
        while digit(i) {
            i += 1;
        }
    }
    if matches!(src.get(i), Some('e' | 'E')) {
        let sign = usize::from(matches!(src.get(i + 1), Some('+' | '-')));
        if digit(i + 1 + sign) {
            i += 1 + sign;
            while digit(i) {
                i += 1;
            }
        }
    }
    i
}

fn quote_char(c: char) -> String {
    if c.is_control() {
        format!("{c:?}")
    } else {
        format!("'{c}'")
    }
}

// ---------------------------------------------------------------------------------------------
// Syntax tree

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// A char range of the source, for messages.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
}

#[derive(Debug)]
enum Node {
    Num(f64),
    Neg(Box<Node>),
    /// A left-associative run of operators of one precedence level, kept flat so that long
    /// sums never make the tree deep. Each step carries the span of the source it covers.
    Chain {
        first: Box<Node>,
        rest: Vec<(BinOp, Node, Span)>,
    },
    Pow {
        base: Box<Node>,
        exponent: Box<Node>,
        span: Span,
    },
    Call {
        func: Func,
        args: Vec<Node>,
        span: Span,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Func {
    Sqrt,
    Abs,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Ln,
    Log10,
    Log2,
    Exp,
    Floor,
    Ceil,
    Round,
    Min,
    Max,
    Pow,
}

/// Function names as written, for lookups and messages.
const FUNCTIONS: &[(&str, Func)] = &[
    ("sqrt", Func::Sqrt),
    ("abs", Func::Abs),
    ("sin", Func::Sin),
    ("cos", Func::Cos),
    ("tan", Func::Tan),
    ("asin", Func::Asin),
    ("acos", Func::Acos),
    ("atan", Func::Atan),
    ("ln", Func::Ln),
    ("log", Func::Log10),
    ("log2", Func::Log2),
    ("exp", Func::Exp),
    ("floor", Func::Floor),
    ("ceil", Func::Ceil),
    ("round", Func::Round),
    ("min", Func::Min),
    ("max", Func::Max),
    ("pow", Func::Pow),
];

const CONSTANTS: &[(&str, f64)] = &[
    ("pi", std::f64::consts::PI),
    ("\u{3c0}", std::f64::consts::PI),
    ("e", std::f64::consts::E),
];

impl Func {
    fn lookup(name: &str) -> Option<Self> {
        FUNCTIONS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    /// (fewest, most) arguments; `None` for no upper bound.
    fn arity(self) -> (usize, Option<usize>) {
        match self {
            Self::Min | Self::Max => (1, None),
            Self::Pow => (2, Some(2)),
            _ => (1, Some(1)),
        }
    }
}

fn constant(name: &str) -> Option<f64> {
    CONSTANTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

fn function_list() -> String {
    FUNCTIONS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// Parser

struct Parser<'a> {
    tokens: &'a [Token],
    next: usize,
    src: &'a [char],
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Token {
        self.tokens
            .get(self.next)
            .or_else(|| self.tokens.last())
            .copied()
            .unwrap_or(Token {
                tok: Tok::End,
                start: self.src.len(),
                end: self.src.len(),
            })
    }

    fn bump(&mut self) -> Token {
        let t = self.peek();
        if t.tok != Tok::End {
            self.next += 1;
        }
        t
    }

    fn text(&self, start: usize, end: usize) -> String {
        self.src
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .collect()
    }

    /// Enters one nesting level; fails past [`MAX_NESTING`].
    fn enter(&mut self, at: usize) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            Err(CalcError::at(
                at,
                format!("nested more than {MAX_NESTING} levels deep"),
            ))
        } else {
            Ok(())
        }
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn unexpected(&self, t: Token) -> CalcError {
        match t.tok {
            Tok::End => CalcError::at(t.start, "unexpected end of expression"),
            Tok::Num(_) | Tok::Ident | Tok::LParen if self.next > 0 => {
                // A value right after a complete value: the usual cause is `2pi` or `2(3)`.
                CalcError::at(
                    t.start,
                    format!(
                        "unexpected '{}' (missing operator? write multiplication as *, e.g. 2*pi)",
                        self.text(t.start, t.end)
                    ),
                )
            }
            _ => CalcError::at(
                t.start,
                format!("unexpected '{}'", self.text(t.start, t.end)),
            ),
        }
    }

    fn expression(&mut self) -> Result<Node, CalcError> {
        self.chain(
            &[(Tok::Plus, BinOp::Add), (Tok::Minus, BinOp::Sub)],
            Self::term,
        )
    }

    fn term(&mut self) -> Result<Node, CalcError> {
        self.chain(
            &[
                (Tok::Star, BinOp::Mul),
                (Tok::Slash, BinOp::Div),
                (Tok::Percent, BinOp::Rem),
            ],
            Self::unary,
        )
    }

    fn chain(
        &mut self,
        ops: &[(Tok, BinOp)],
        operand: fn(&mut Self) -> Result<Node, CalcError>,
    ) -> Result<Node, CalcError> {
        let start = self.peek().start;
        let first = operand(self)?;
        let mut rest = Vec::new();
        while let Some(op) = ops
            .iter()
            .find(|(tok, _)| *tok == self.peek().tok)
            .map(|(_, op)| *op)
        {
            self.bump();
            let rhs = operand(self)?;
            let end = self.last_end(start);
            rest.push((op, rhs, Span { start, end }));
        }
        if rest.is_empty() {
            Ok(first)
        } else {
            Ok(Node::Chain {
                first: Box::new(first),
                rest,
            })
        }
    }

    fn unary(&mut self) -> Result<Node, CalcError> {
        let t = self.peek();
        match t.tok {
            Tok::Minus | Tok::Plus => {
                self.bump();
                self.enter(t.start)?;
                let inner = self.unary()?;
                self.leave();
                Ok(if t.tok == Tok::Minus {
                    Node::Neg(Box::new(inner))
                } else {
                    inner
                })
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<Node, CalcError> {
        let start = self.peek().start;
        let base = self.primary()?;
        let caret = self.peek();
        if caret.tok != Tok::Caret {
            return Ok(base);
        }
        self.bump();
        self.enter(caret.start)?;
        let exponent = self.unary()?;
        self.leave();
        let end = self.last_end(start);
        Ok(Node::Pow {
            base: Box::new(base),
            exponent: Box::new(exponent),
            span: Span { start, end },
        })
    }

    fn last_end(&self, fallback: usize) -> usize {
        self.next
            .checked_sub(1)
            .and_then(|i| self.tokens.get(i))
            .map_or(fallback, |t| t.end)
    }

    fn primary(&mut self) -> Result<Node, CalcError> {
        let t = self.peek();
        match t.tok {
            Tok::Num(v) => {
                self.bump();
                Ok(Node::Num(v))
            }
            Tok::LParen => {
                self.bump();
                self.enter(t.start)?;
                let inner = self.expression()?;
                self.close(t)?;
                self.leave();
                Ok(inner)
            }
            Tok::Ident => {
                self.bump();
                self.name(t)
            }
            _ => Err(self.unexpected_operand(t)),
        }
    }

    /// An operand was expected and `t` came instead.
    fn unexpected_operand(&self, t: Token) -> CalcError {
        match t.tok {
            Tok::End => CalcError::at(
                t.start,
                "unexpected end of expression (expected a number, a constant, a function or '(')",
            ),
            _ => CalcError::at(
                t.start,
                format!("unexpected '{}'", self.text(t.start, t.end)),
            ),
        }
    }

    /// Expects the `)` that closes `open`.
    fn close(&mut self, open: Token) -> Result<(), CalcError> {
        let t = self.peek();
        match t.tok {
            Tok::RParen => {
                self.bump();
                Ok(())
            }
            Tok::End => Err(CalcError::at(
                t.start,
                format!("missing ')' to close '(' at position {}", open.start + 1),
            )),
            _ => Err(self.unexpected(t)),
        }
    }

    fn name(&mut self, t: Token) -> Result<Node, CalcError> {
        let written = self.text(t.start, t.end);
        let name = written.to_lowercase();
        let open = self.peek();
        if open.tok != Tok::LParen {
            if let Some(v) = constant(&name) {
                return Ok(Node::Num(v));
            }
            if Func::lookup(&name).is_some() {
                return Err(CalcError::at(
                    t.start,
                    format!("function '{written}' needs parentheses, like {name}(2)"),
                ));
            }
            return Err(CalcError::at(
                t.start,
                format!(
                    "unknown name '{written}' (there are no variables; the constants are pi and e, the functions {})",
                    function_list()
                ),
            ));
        }
        let Some(func) = Func::lookup(&name) else {
            let problem = if constant(&name).is_some() {
                format!(
                    "'{written}' is a constant, not a function (write {name}*(...) to multiply)"
                )
            } else {
                format!(
                    "unknown function '{written}' (the functions are {})",
                    function_list()
                )
            };
            return Err(CalcError::at(t.start, problem));
        };
        self.bump();
        self.enter(open.start)?;
        let mut args = Vec::new();
        if self.peek().tok != Tok::RParen {
            args.push(self.expression()?);
            while self.peek().tok == Tok::Comma {
                self.bump();
                args.push(self.expression()?);
            }
        }
        self.close(open)?;
        self.leave();
        let (fewest, most) = func.arity();
        let count = args.len();
        if count < fewest || most.is_some_and(|m| count > m) {
            let wanted = match (fewest, most) {
                (1, Some(1)) => "exactly 1 argument".to_owned(),
                (n, Some(m)) if n == m => format!("exactly {n} arguments"),
                (n, _) => format!("at least {n} argument{}", if n == 1 { "" } else { "s" }),
            };
            return Err(CalcError::at(
                t.start,
                format!("function '{name}' takes {wanted}, got {count}"),
            ));
        }
        Ok(Node::Call {
            func,
            args,
            span: Span {
                start: t.start,
                end: self.last_end(t.end),
            },
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/// The source of `span`, trimmed and shortened for a message.
fn excerpt(src: &[char], span: Span) -> String {
    const MAX: usize = 60;
    let text: String = src
        .get(span.start..span.end)
        .unwrap_or_default()
        .iter()
        .collect();
    let text = text.trim();
    if text.chars().count() > MAX {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}...")
    } else {
        text.to_owned()
    }
}

fn finite(value: f64, src: &[char], span: Span) -> Result<f64, CalcError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(CalcError::math(format!(
            "Result is not a finite number: {} (overflow, or undefined for these values)",
            excerpt(src, span)
        )))
    }
}

fn eval(node: &Node, src: &[char]) -> Result<f64, CalcError> {
    match node {
        Node::Num(v) => Ok(*v),
        Node::Neg(inner) => Ok(-eval(inner, src)?),
        Node::Chain { first, rest } => {
            let mut acc = eval(first, src)?;
            for (op, rhs, span) in rest {
                let r = eval(rhs, src)?;
                let value = match op {
                    BinOp::Add => acc + r,
                    BinOp::Sub => acc - r,
                    BinOp::Mul => acc * r,
                    BinOp::Div if r == 0.0 => {
                        return Err(CalcError::math(format!(
                            "Division by zero in {}",
                            excerpt(src, *span)
                        )));
                    }
                    BinOp::Div => acc / r,
                    BinOp::Rem if r == 0.0 => {
                        return Err(CalcError::math(format!(
                            "Modulo by zero in {}",
                            excerpt(src, *span)
                        )));
                    }
                    BinOp::Rem => acc % r,
                };
                acc = finite(value, src, *span)?;
            }
            Ok(acc)
        }
        Node::Pow {
            base,
            exponent,
            span,
        } => {
            let b = eval(base, src)?;
            let e = eval(exponent, src)?;
            finite(b.powf(e), src, *span)
        }
        Node::Call { func, args, span } => {
            let mut values = Vec::with_capacity(args.len());
            for a in args {
                values.push(eval(a, src)?);
            }
            let x = values.first().copied().unwrap_or(f64::NAN);
            let value = match func {
                Func::Sqrt => x.sqrt(),
                Func::Abs => x.abs(),
                Func::Sin => x.sin(),
                Func::Cos => x.cos(),
                Func::Tan => x.tan(),
                Func::Asin => x.asin(),
                Func::Acos => x.acos(),
                Func::Atan => x.atan(),
                Func::Ln => x.ln(),
                Func::Log10 => x.log10(),
                Func::Log2 => x.log2(),
                Func::Exp => x.exp(),
                Func::Floor => x.floor(),
                Func::Ceil => x.ceil(),
                Func::Round => x.round(),
                Func::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
                Func::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Func::Pow => x.powf(values.get(1).copied().unwrap_or(f64::NAN)),
            };
            finite(value, src, *span)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_spans_cover_the_failing_step() {
        let err = evaluate("1 + 2 / (3 - 3)").unwrap_err();
        assert_eq!(err.message(), "Division by zero in 2 / (3 - 3)");
    }

    #[test]
    fn nesting_depth_is_counted_per_level_not_per_token() {
        let ok = format!("{}1{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert_eq!(evaluate(&ok), Ok(1.0));
        let deep = format!(
            "{}1{}",
            "(".repeat(MAX_NESTING + 1),
            ")".repeat(MAX_NESTING + 1)
        );
        assert_eq!(
            evaluate(&deep).unwrap_err().message(),
            "Invalid expression at position 65: nested more than 64 levels deep"
        );
    }
}
