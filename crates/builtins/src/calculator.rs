//! The `calculator` built-in: evaluates an arithmetic expression with [`crate::evaluate`] and
//! returns `{result}` (`docs/tool-model.md#built-in-tools`).

use serde_json::{Number, Value, json};
use toolgate_core::{
    BoxFuture, Category, Consequence, Effect, ParamType, Parameter, Tool, ToolBuilder, ToolContext,
    ToolDefinition, ToolError, ToolOutput,
};

use crate::args::string_arg;
use crate::expr::{CalcErrorKind, evaluate};

/// The tool's name.
pub const CALCULATOR: &str = "calculator";

/// The description a model routes by.
pub const CALCULATOR_DESCRIPTION: &str = "Evaluates an arithmetic expression and returns {result}, a number. \
Use it for any arithmetic instead of working it out yourself: sums, percentages, unit conversions, \
compound growth, trigonometry. Supports + - * / and % (remainder), ^ for powers (right-associative \
and tighter than a leading minus: -2^2 = -4), parentheses, decimals and scientific notation (1.5e3), \
the constants pi and e, and the functions sqrt, abs, sin, cos, tan, asin, acos, atan (radians), \
ln, log (base 10), log2, exp, floor, ceil, round, pow(x, y), min(a, b, ...) and max(a, b, ...). \
There are no variables and no implicit multiplication: write 2*pi, not 2pi. Computes in 64-bit \
floating point. A malformed expression fails with the character position of the problem; division \
by zero and results too large or undefined (like sqrt(-1)) fail with a message. At most 4096 \
characters and 64 levels of nesting.";

/// `calculator`: arithmetic expressions → `{result}`.
#[derive(Clone, Debug)]
pub struct Calculator {
    definition: ToolDefinition,
}

impl Calculator {
    /// The calculator tool.
    pub fn new() -> Self {
        let definition = ToolBuilder::new(CALCULATOR, CALCULATOR_DESCRIPTION)
            .title("Calculator")
            .category(Category::System)
            .effect(Effect::Read)
            .consequence(Consequence::Low)
            .requires_confirmation(false)
            .param(
                Parameter::new("expression", ParamType::String)
                    .description(
                        "The arithmetic expression to evaluate, e.g. \"(2 + 3) * 4^2\" or \"sqrt(2) * sin(pi / 4)\"",
                    )
                    .required(),
            )
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "result": {"type": "number", "description": "The value of the expression"}
                },
                "required": ["result"],
                "additionalProperties": false
            }))
            .tag("math")
            .definition()
            .clone();
        Self { definition }
    }
}

impl Default for Calculator {
    fn default() -> Self {
        Self::new()
    }
}

impl Tool for Calculator {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            ctx.check_cancelled()?;
            let expression = string_arg(&args, "expression")?;
            let value = evaluate(expression).map_err(|e| match e.kind() {
                CalcErrorKind::Syntax => ToolError::validation(e.message()),
                CalcErrorKind::Math => ToolError::execution(e.message()),
            })?;
            Ok(json!({ "result": to_json_number(value)? }))
        })
    }
}

/// Integral values within f64's exact integer range become JSON integers (`4`, not `4.0`);
/// negative zero becomes `0`.
fn to_json_number(value: f64) -> Result<Value, ToolError> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value == 0.0 {
        return Ok(json!(0));
    }
    if value.fract() == 0.0 && value.abs() <= EXACT {
        // In range and integral, so the conversion is exact.
        #[allow(clippy::cast_possible_truncation)]
        return Ok(json!(value as i64));
    }
    Number::from_f64(value)
        .map(Value::Number)
        .ok_or_else(|| ToolError::execution(format!("Result is not a finite number: {value}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_render_as_integers_when_exact() {
        assert_eq!(to_json_number(4.0), Ok(json!(4)));
        assert_eq!(to_json_number(-0.0), Ok(json!(0)));
        assert_eq!(to_json_number(0.5), Ok(json!(0.5)));
        assert_eq!(to_json_number(1e300), Ok(json!(1e300)));
        assert_eq!(to_json_number(-3.0), Ok(json!(-3)));
    }
}
