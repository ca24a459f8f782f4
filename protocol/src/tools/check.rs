//! Reading a tool call's arguments into their type ([`parse`]), and when they do not fit, the
//! one thing wrong with them, phrased for a model ([`ArgumentError`]). serde decides what
//! fits; the text is found afterwards, from the arguments' schema and by trying each field.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::{Map, Value};

use super::args::ToolArguments;
use super::name::ToolName;
use super::schema::input_schema;

/// What is wrong with a tool call's arguments. Its text is the one the model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    /// The arguments are not a JSON object.
    #[error("The {tool} tool's arguments must be a JSON object with {}.", .fields.join(", "))]
    NotAnObject {
        /// The tool called.
        tool: ToolName,
        /// Its arguments, in declaration order.
        fields: &'static [&'static str],
    },
    /// An argument the tool does not have (the first, in key order).
    #[error("Unknown argument {name:?} for the {tool} tool; its arguments are: {}.", .fields.join(", "))]
    Unknown {
        /// The tool called.
        tool: ToolName,
        /// The argument given.
        name: String,
        /// Its arguments, in declaration order.
        fields: &'static [&'static str],
    },
    /// A required argument is absent.
    #[error("{field} is required.")]
    Missing {
        /// The argument.
        field: &'static str,
    },
    /// A text argument is something else.
    #[error("{field} must be a string, not {kind}.")]
    NotAString {
        /// The argument.
        field: &'static str,
        /// What it is instead ("a number", "null", ...).
        kind: &'static str,
    },
    /// A text argument that must not be empty is.
    #[error("{field} must not be empty.")]
    Empty {
        /// The argument.
        field: &'static str,
    },
    /// A text argument is none of the names it may be.
    #[error("{field} must be {}, not {value:?}.", one_of(allowed))]
    NotOneOf {
        /// The argument.
        field: &'static str,
        /// What it is.
        value: String,
        /// The names it may be, in the schema's order.
        allowed: Vec<String>,
    },
    /// A number argument is not a whole number of at least `minimum`.
    #[error("{field} must be an integer of at least {minimum}, not {value}.")]
    NotAtLeast {
        /// The argument.
        field: &'static str,
        /// The smallest it may be.
        minimum: u64,
        /// What it is, as JSON.
        value: String,
    },
    /// A flag argument is not a boolean.
    #[error("{field} must be true or false, not {kind}.")]
    NotABoolean {
        /// The argument.
        field: &'static str,
        /// What it is instead.
        kind: &'static str,
    },
    /// No single argument explains the refusal: serde's own words.
    #[error("{0}")]
    Other(String),
}

/// `a, b or c`.
fn one_of(names: &[String]) -> String {
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// `args` read as `T`, or the first thing wrong with them: not an object, an unknown argument
/// (the first in key order), then each argument in turn (those of [`ToolArguments::CHECKED_FIRST`]
/// first, then the rest in declaration order): absent when required, or of a value `T` does not
/// take.
pub fn parse<'a, T: ToolArguments<'a>>(args: &'a Value) -> Result<T, ArgumentError> {
    T::deserialize(args).map_err(|err| diagnose::<T>(args).unwrap_or(ArgumentError::Other(err.to_string())))
}

/// The first thing wrong with `args` for `T`, if one argument alone explains it.
fn diagnose<'a, T: ToolArguments<'a>>(args: &Value) -> Option<ArgumentError> {
    let tool = T::TOOL;
    let fields = field_names::<T>();
    let Some(map) = args.as_object() else {
        return Some(ArgumentError::NotAnObject { tool, fields });
    };
    if let Some(unknown) = map.keys().find(|k| !fields.contains(&k.as_str())) {
        return Some(ArgumentError::Unknown { tool, name: unknown.clone(), fields });
    }
    let schema = input_schema::<T>();
    let required: Vec<&str> =
        schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let first = T::CHECKED_FIRST.iter().copied().filter(|f| fields.contains(f));
    let order = first.chain(fields.iter().copied().filter(|f| !T::CHECKED_FIRST.contains(f)));
    for field in order {
        match map.get(field) {
            None if required.contains(&field) => return Some(ArgumentError::Missing { field }),
            Some(value) if !takes::<T>(&schema, &required, field, value) => {
                return wrong(field, &schema["properties"][field], value);
            }
            _ => {}
        }
    }
    None
}

/// Whether `T` takes `value` for `field` when every other argument is absent or, if required,
/// a value its schema allows.
fn takes<'a, T: ToolArguments<'a>>(schema: &Value, required: &[&str], field: &str, value: &Value) -> bool {
    let mut probe = Map::new();
    for &other in required.iter().filter(|&&r| r != field) {
        probe.insert(other.to_owned(), fitting(&schema["properties"][other]));
    }
    probe.insert(field.to_owned(), value.clone());
    T::deserialize(Value::Object(probe)).is_ok()
}

/// A value the property `schema` allows.
fn fitting(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|names| names.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("integer") => schema["minimum"].clone(),
        Some("boolean") => Value::Bool(false),
        // The tools' strings ask at most for one character.
        _ => Value::String("x".to_owned()),
    }
}

/// What is wrong with `value`, which the argument `field` (of property `schema`) does not take,
/// as its schema explains it (`None` when it does not).
fn wrong(field: &'static str, schema: &Value, value: &Value) -> Option<ArgumentError> {
    Some(match schema["type"].as_str() {
        Some("integer") => {
            let minimum = schema["minimum"].as_u64().unwrap_or(0);
            ArgumentError::NotAtLeast { field, minimum, value: value.to_string() }
        }
        Some("boolean") => ArgumentError::NotABoolean { field, kind: kind(value) },
        _ => match value {
            Value::String(text) => match schema["enum"].as_array() {
                Some(names) => ArgumentError::NotOneOf {
                    field,
                    value: text.clone(),
                    allowed: names.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
                },
                None if text.is_empty() && schema["minLength"].as_u64().is_some_and(|n| n > 0) => {
                    ArgumentError::Empty { field }
                }
                None => return None,
            },
            other => ArgumentError::NotAString { field, kind: kind(other) },
        },
    })
}

/// A JSON value's kind, as a model reads it.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The argument names of `T`, in declaration order, as serde's derive lists them.
fn field_names<'a, T: Deserialize<'a>>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    // The deserializer only records the names it is handed; the error it ends with is expected.
    let _ = T::deserialize(FieldNames(&mut names));
    names
}

/// A deserializer that records the field names a struct asks for, and reads nothing.
struct FieldNames<'n>(&'n mut &'static [&'static str]);

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only a struct's field names are read"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        self.deserialize_any(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{EditArgs, GrepArgs, GrepOutputMode, ReadArgs};
    use serde_json::json;

    #[test]
    fn field_names_come_in_declaration_order_as_on_the_wire() {
        assert_eq!(field_names::<ReadArgs<'_>>(), ["file_path", "offset", "limit"]);
        assert_eq!(field_names::<GrepArgs<'_>>()[3], "type");
    }

    /// What a client sends with these types is what the daemon reads back; long strings are
    /// borrowed from the arguments, not copied.
    #[test]
    fn arguments_round_trip_and_borrow() {
        let grep = GrepArgs {
            pattern: "fn main".into(),
            path: Some("src".into()),
            glob: None,
            file_type: Some("rust".into()),
            output_mode: Some(GrepOutputMode::Content),
            case_insensitive: None,
            context: Some(2),
            multiline: None,
            head_limit: None,
            offset: None,
        };
        let sent = serde_json::to_value(&grep).unwrap_or_default();
        assert_eq!(
            sent,
            json!({"pattern": "fn main", "path": "src", "type": "rust", "output_mode": "content", "context": 2})
        );
        assert_eq!(parse::<GrepArgs<'_>>(&sent), Ok(grep));
        let args = json!({"file_path": "a", "old_string": "x", "new_string": "y"});
        let edit = parse::<EditArgs<'_>>(&args).map_err(|e| e.to_string());
        assert!(matches!(edit, Ok(EditArgs { old_string: std::borrow::Cow::Borrowed("x"), .. })), "{edit:?}");
    }

    #[test]
    fn the_one_thing_wrong_is_named() {
        let text = |args: Value| {
            parse::<GrepArgs<'_>>(&args).map(|_| String::new()).unwrap_or_else(|e| e.to_string())
        };
        assert_eq!(
            text(json!({"pattern": "x", "output_mode": "all"})),
            "output_mode must be files_with_matches, content or count, not \"all\"."
        );
        assert_eq!(
            text(json!({"output_mode": "all"})),
            "output_mode must be files_with_matches, content or count, not \"all\"."
        );
        assert_eq!(text(json!({"pattern": "", "head_limit": 0})), "pattern must not be empty.");
        assert_eq!(one_of(&["a".into()]), "a");
    }
}
