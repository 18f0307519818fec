//! The calculator: the expression language case by case, its error messages, the tool's
//! envelope-facing behaviour, and a property test that no input panics or hangs.
#![cfg(test)]

use proptest::prelude::*;
use serde_json::{Value, json};
use toolgate_builtins::{CalcErrorKind, Calculator, MAX_EXPRESSION_CHARS, MAX_NESTING, evaluate};
use toolgate_core::{ErrorKind, Principal, Tool, ToolContext, ToolName};

fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn values() {
    use std::f64::consts::{E, PI};
    let cases: &[(&str, f64)] = &[
        // literals
        ("42", 42.0),
        ("  7  ", 7.0),
        ("3.25", 3.25),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("1.5E-3", 0.0015),
        ("2e+2", 200.0),
        ("1e-400", 0.0),
        // precedence
        ("2 + 3 * 4", 14.0),
        ("2 * 3 + 4", 10.0),
        ("10 - 4 - 3", 3.0),
        ("100 / 10 / 5", 2.0),
        ("7 % 3", 1.0),
        ("-7 % 3", -1.0),
        ("2 + 10 % 4 * 3", 8.0),
        ("5.5 % 2", 1.5),
        // parentheses
        ("(2 + 3) * 4", 20.0),
        ("((((1))))", 1.0),
        ("2 * (3 + (4 - 1)) / 3", 4.0),
        // unary minus and plus
        ("-3", -3.0),
        ("+3", 3.0),
        ("--3", 3.0),
        ("-+-3", 3.0),
        ("2 - -3", 5.0),
        ("2 * -3", -6.0),
        ("-(2 + 3)", -5.0),
        // powers: right-associative, tighter than unary minus
        ("2 ^ 10", 1024.0),
        ("2 ^ 3 ^ 2", 512.0),
        ("(2 ^ 3) ^ 2", 64.0),
        ("-2 ^ 2", -4.0),
        ("(-2) ^ 2", 4.0),
        ("2 ^ -1", 0.5),
        ("2 ^ -1 ^ 2", 0.5),
        ("2 * 3 ^ 2", 18.0),
        ("2 ** 3", 8.0),
        ("4 ^ 0.5", 2.0),
        ("0 ^ 0", 1.0),
        // constants, case-insensitive names
        ("pi", PI),
        ("e", E),
        ("\u{3c0} / 2", PI / 2.0),
        ("2 * PI", 2.0 * PI),
        ("E ^ 2", E * E),
        // functions
        ("sqrt(16)", 4.0),
        ("abs(-2.5)", 2.5),
        ("sin(0)", 0.0),
        ("cos(pi)", -1.0),
        ("tan(pi / 4)", 1.0),
        ("asin(1)", PI / 2.0),
        ("acos(1)", 0.0),
        ("atan(1)", PI / 4.0),
        ("ln(e)", 1.0),
        ("log(1000)", 3.0),
        ("log2(8)", 3.0),
        ("exp(0)", 1.0),
        ("floor(2.7)", 2.0),
        ("floor(-2.5)", -3.0),
        ("ceil(2.1)", 3.0),
        ("round(2.5)", 3.0),
        ("round(-2.5)", -3.0),
        ("min(3, 1, 2)", 1.0),
        ("max(3, 1, 2)", 3.0),
        ("min(5)", 5.0),
        ("pow(2, 8)", 256.0),
        ("SQRT(4)", 2.0),
        ("sqrt (9)", 3.0),
        ("max(1, min(4, 2) * 3) - sqrt(abs(-16))", 2.0),
        ("-sqrt(4) ^ 2", -4.0),
        // typographic operators
        ("6 \u{00f7} 3 \u{00d7} 2 \u{2212} 1", 3.0),
    ];
    for (expr, want) in cases {
        let got = evaluate(expr).unwrap_or_else(|e| panic!("{expr:?} failed: {e}"));
        assert!(approx(got, *want), "{expr:?} = {got}, want {want}");
    }
}

#[test]
fn errors() {
    use CalcErrorKind::{Math, Syntax};
    let cases: &[(&str, CalcErrorKind, &str)] = &[
        (
            "",
            Syntax,
            "Expression is empty: give an arithmetic expression like 2 * (3 + 4)",
        ),
        (
            "   ",
            Syntax,
            "Expression is empty: give an arithmetic expression like 2 * (3 + 4)",
        ),
        (
            "1 + )",
            Syntax,
            "Invalid expression at position 5: unexpected ')'",
        ),
        (
            "(1 + 2))",
            Syntax,
            "Invalid expression at position 8: unexpected ')'",
        ),
        (
            "1 +",
            Syntax,
            "Invalid expression at position 4: unexpected end of expression (expected a number, a constant, a function or '(')",
        ),
        (
            "(1 + 2",
            Syntax,
            "Invalid expression at position 7: missing ')' to close '(' at position 1",
        ),
        (
            "sqrt(4",
            Syntax,
            "Invalid expression at position 7: missing ')' to close '(' at position 5",
        ),
        (
            "2 $ 3",
            Syntax,
            "Invalid expression at position 3: unexpected character '$'",
        ),
        (
            "2 3",
            Syntax,
            "Invalid expression at position 3: unexpected '3' (missing operator? write multiplication as *, e.g. 2*pi)",
        ),
        (
            "2pi",
            Syntax,
            "Invalid expression at position 2: unexpected 'pi' (missing operator? write multiplication as *, e.g. 2*pi)",
        ),
        (
            "2(3)",
            Syntax,
            "Invalid expression at position 2: unexpected '(' (missing operator? write multiplication as *, e.g. 2*pi)",
        ),
        (
            "*2",
            Syntax,
            "Invalid expression at position 1: unexpected '*'",
        ),
        (
            "2 * * 3",
            Syntax,
            "Invalid expression at position 5: unexpected '*'",
        ),
        (
            "1, 2",
            Syntax,
            "Invalid expression at position 2: unexpected ','",
        ),
        (
            "()",
            Syntax,
            "Invalid expression at position 2: unexpected ')'",
        ),
        (
            "1.2.3",
            Syntax,
            "Invalid expression at position 4: unexpected '.3' (missing operator? write multiplication as *, e.g. 2*pi)",
        ),
        (
            ".",
            Syntax,
            "Invalid expression at position 1: unexpected '.'",
        ),
        (
            "1e999",
            Syntax,
            "Invalid expression at position 1: number '1e999' is too large (the largest is about 1.8e308)",
        ),
        (
            "x + 1",
            Syntax,
            "Invalid expression at position 1: unknown name 'x' (there are no variables; the constants are pi and e, the functions sqrt, abs, sin, cos, tan, asin, acos, atan, ln, log, log2, exp, floor, ceil, round, min, max, pow)",
        ),
        (
            "foo(1)",
            Syntax,
            "Invalid expression at position 1: unknown function 'foo' (the functions are sqrt, abs, sin, cos, tan, asin, acos, atan, ln, log, log2, exp, floor, ceil, round, min, max, pow)",
        ),
        (
            "sqrt 4",
            Syntax,
            "Invalid expression at position 1: function 'sqrt' needs parentheses, like sqrt(2)",
        ),
        (
            "pi(2)",
            Syntax,
            "Invalid expression at position 1: 'pi' is a constant, not a function (write pi*(...) to multiply)",
        ),
        (
            "1 + sqrt()",
            Syntax,
            "Invalid expression at position 5: function 'sqrt' takes exactly 1 argument, got 0",
        ),
        (
            "sqrt(1, 2)",
            Syntax,
            "Invalid expression at position 1: function 'sqrt' takes exactly 1 argument, got 2",
        ),
        (
            "pow(2)",
            Syntax,
            "Invalid expression at position 1: function 'pow' takes exactly 2 arguments, got 1",
        ),
        (
            "max()",
            Syntax,
            "Invalid expression at position 1: function 'max' takes at least 1 argument, got 0",
        ),
        (
            "1 +\u{0007}",
            Syntax,
            "Invalid expression at position 4: unexpected character '\\u{7}'",
        ),
        // math errors
        ("1 / 0", Math, "Division by zero in 1 / 0"),
        ("1 + 2 / (3 - 3)", Math, "Division by zero in 2 / (3 - 3)"),
        ("5 % 0", Math, "Modulo by zero in 5 % 0"),
        (
            "1e308 * 10",
            Math,
            "Result is not a finite number: 1e308 * 10 (overflow, or undefined for these values)",
        ),
        (
            "10 ^ 400",
            Math,
            "Result is not a finite number: 10 ^ 400 (overflow, or undefined for these values)",
        ),
        (
            "2 ^ 2 ^ 2 ^ 2 ^ 2",
            Math,
            "Result is not a finite number: 2 ^ 2 ^ 2 ^ 2 ^ 2 (overflow, or undefined for these values)",
        ),
        (
            "sqrt(-1)",
            Math,
            "Result is not a finite number: sqrt(-1) (overflow, or undefined for these values)",
        ),
        (
            "1 + ln(0)",
            Math,
            "Result is not a finite number: ln(0) (overflow, or undefined for these values)",
        ),
        (
            "exp(1000) * 0",
            Math,
            "Result is not a finite number: exp(1000) (overflow, or undefined for these values)",
        ),
        (
            "0 ^ -1",
            Math,
            "Result is not a finite number: 0 ^ -1 (overflow, or undefined for these values)",
        ),
        (
            "(-8) ^ (1/3)",
            Math,
            "Result is not a finite number: (-8) ^ (1/3) (overflow, or undefined for these values)",
        ),
        (
            "asin(2)",
            Math,
            "Result is not a finite number: asin(2) (overflow, or undefined for these values)",
        ),
    ];
    for (expr, kind, message) in cases {
        let err = evaluate(expr).expect_err(expr);
        assert_eq!(err.message(), *message, "{expr:?}");
        assert_eq!(err.kind(), *kind, "{expr:?}");
    }
}

#[test]
fn limits() {
    let long = format!("1{}", "+1".repeat(MAX_EXPRESSION_CHARS / 2));
    assert_eq!(
        evaluate(&long).unwrap_err().message(),
        format!(
            "Expression is too long: {} characters (at most {MAX_EXPRESSION_CHARS})",
            MAX_EXPRESSION_CHARS + 1
        )
    );
    // Just under the limit: a long flat sum is fine (no deep recursion).
    let sum = format!("1{}", "+1".repeat(MAX_EXPRESSION_CHARS / 2 - 1));
    assert_eq!(evaluate(&sum).unwrap(), (MAX_EXPRESSION_CHARS / 2) as f64);

    for (open, close) in [("(", ")"), ("-(", ")"), ("sqrt(", ")"), ("2^", "")] {
        let deep = format!("{}1{}", open.repeat(500), close.repeat(500));
        let err = evaluate(&deep).unwrap_err();
        assert!(
            err.message()
                .ends_with(&format!("nested more than {MAX_NESTING} levels deep")),
            "{open}: {}",
            err.message()
        );
    }
    let signs = format!("{}1", "-".repeat(4000));
    assert!(evaluate(&signs).unwrap_err().message().contains("nested"));
}

fn ctx() -> ToolContext {
    ToolContext::detached(ToolName::parse("calculator").unwrap(), Principal::local())
}

async fn call(args: Value) -> Result<Value, toolgate_core::ToolError> {
    Calculator::new().call(args, ctx()).await
}

#[tokio::test]
async fn tool_returns_result_and_maps_error_kinds() {
    assert_eq!(
        call(json!({"expression": "2 + 2"})).await,
        Ok(json!({"result": 4}))
    );
    assert_eq!(
        call(json!({"expression": "1 / 4"})).await,
        Ok(json!({"result": 0.25}))
    );
    assert_eq!(
        call(json!({"expression": "-0"})).await,
        Ok(json!({"result": 0}))
    );
    let syntax = call(json!({"expression": "1 + )"})).await.unwrap_err();
    assert_eq!(syntax.kind(), ErrorKind::Validation);
    assert_eq!(
        syntax.message(),
        "Invalid expression at position 5: unexpected ')'"
    );
    let math = call(json!({"expression": "1 / 0"})).await.unwrap_err();
    assert_eq!(math.kind(), ErrorKind::Execution);
    assert_eq!(math.message(), "Division by zero in 1 / 0");
    let missing = call(json!({})).await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::Validation);
    assert_eq!(
        missing.message(),
        "Missing required argument expression (a string)"
    );
    let wrong = call(json!({"expression": 3})).await.unwrap_err();
    assert_eq!(wrong.message(), "Argument expression must be a string");
    let not_object = call(json!("2+2")).await.unwrap_err();
    assert_eq!(not_object.kind(), ErrorKind::Validation);
}

#[tokio::test]
async fn cancelled_call_does_nothing() {
    let ctx = ctx();
    ctx.cancellation().cancel();
    let err = Calculator::new()
        .call(json!({"expression": "1"}), ctx)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), "Request was cancelled");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC{0,200}") {
        let _ = evaluate(&s);
    }

    #[test]
    fn calculator_alphabet_never_panics(s in "[0-9a-z.eE+\\-*/%^(), ]{0,300}") {
        match evaluate(&s) {
            Ok(v) => prop_assert!(v.is_finite()),
            Err(e) => prop_assert!(!e.message().is_empty()),
        }
    }

    #[test]
    fn deep_random_nesting_never_overflows(open in "[-+(]{0,600}", close in "[)]{0,600}") {
        let _ = evaluate(&format!("{open}1{close}"));
    }

    #[test]
    fn sums_of_integers_are_exact(xs in proptest::collection::vec(-1000i32..1000, 1..50)) {
        let expr = xs.iter().map(|x| format!("({x})")).collect::<Vec<_>>().join(" + ");
        let want: i32 = xs.iter().sum();
        prop_assert_eq!(evaluate(&expr).unwrap(), f64::from(want));
    }
}
