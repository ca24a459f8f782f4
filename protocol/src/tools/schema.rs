//! How a tool's `inputSchema` is derived from its arguments' type: schemars' draft-07 output,
//! inlined, with nothing a model does not need (no `$schema`, title, definitions or formats).

use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde_json::Value;

/// The JSON Schema of `T`'s arguments object, as `tools/list` sends it.
pub fn input_schema<T: JsonSchema>() -> Value {
    let mut settings = SchemaSettings::draft07();
    settings.meta_schema = None;
    settings.inline_subschemas = true;
    let mut generator = SchemaGenerator::new(settings);
    let mut schema = T::json_schema(&mut generator);
    // The type's own doc comment is for Rust readers; the tool's description says it for models.
    if let Some(object) = schema.as_object_mut() {
        object.remove("description");
        object.remove("title");
    }
    ForModels.transform(&mut schema);
    schema.to_value()
}

/// The touches every part of an input schema gets.
struct ForModels;

impl Transform for ForModels {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut() {
            // An integer's width is the daemon's business, not the model's.
            object.remove("format");
            // An absent argument and a null one mean the same; the schema names only the type
            // and the values that are not null.
            if let Some(Value::Array(names)) = object.get_mut("enum") {
                names.retain(|name| !name.is_null());
            }
            if let Some(Value::Array(types)) = object.get("type") {
                let named: Vec<&Value> = types.iter().filter(|t| t.as_str() != Some("null")).collect();
                if let [only] = named[..] {
                    let only = only.clone();
                    object.insert("type".to_owned(), only);
                }
            }
            // A doc comment wraps its lines; the description is the paragraph they make.
            if let Some(Value::String(text)) = object.get_mut("description") {
                *text = text.replace('\n', " ");
            }
        }
        transform_subschemas(self, schema);
    }
}
