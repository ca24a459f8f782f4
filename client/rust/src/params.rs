//! Request parameters as they go on the wire: the serialized value itself (LSP style), never
//! wrapped in another object or array.

use jsonrpsee::core::traits::ToRpcParams;
use serde::Serialize;
use serde_json::value::RawValue;

/// The `params` of one request or notification, already serialized.
///
/// [`Params::new`] puts the value on the wire as it serializes: a struct or map becomes
/// `"params": {...}`, a sequence `"params": [...]`. A value that serializes to `null` (such as
/// `()` or `None`) means "no params": the `params` member is left out. Any other JSON value is
/// refused, because JSON-RPC 2.0 only allows an object or an array there.
#[derive(Debug, Clone, Default)]
pub struct Params(Option<Box<RawValue>>);

impl Params {
    /// Serializes `value` as the `params` member.
    ///
    /// # Errors
    /// When `value` cannot be serialized, or serializes to a string, number or boolean.
    pub fn new<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        let raw = serde_json::value::to_raw_value(value)?;
        match raw.get().as_bytes().first() {
            Some(b'{' | b'[') => Ok(Self(Some(raw))),
            Some(b'n') => Ok(Self(None)),
            _ => Err(<serde_json::Error as serde::ser::Error>::custom(
                "JSON-RPC params must be an object or an array",
            )),
        }
    }

    /// No `params` member at all (for `daemon/status`, `tools/list`, `shutdown`, `exit`).
    pub const fn none() -> Self {
        Self(None)
    }

    /// The JSON text that goes on the wire as `params`, if any.
    pub fn as_json(&self) -> Option<&str> {
        self.0.as_deref().map(RawValue::get)
    }
}

impl ToRpcParams for Params {
    fn to_rpc_params(self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filectx_protocol::{ClientInfo, InitializeParams};
    use jsonrpsee::types::{Id, Request};

    fn init_params() -> InitializeParams {
        InitializeParams {
            client_info: Some(ClientInfo { name: "t".to_owned(), version: None }),
            read_only: Some(true),
            ..InitializeParams::new(vec!["/r".to_owned()])
        }
    }

    #[test]
    fn an_object_goes_on_the_wire_unwrapped() -> Result<(), serde_json::Error> {
        let params = Params::new(&init_params())?;
        assert_eq!(params.as_json(), Some(r#"{"clientInfo":{"name":"t"},"roots":["/r"],"readOnly":true}"#));
        let raw = params.to_rpc_params()?;
        let request = Request::borrowed("initialize", raw.as_deref(), Id::Number(1));
        assert_eq!(
            serde_json::to_string(&request)?,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"t"},"roots":["/r"],"readOnly":true}}"#
        );
        Ok(())
    }

    #[test]
    fn arrays_pass_and_null_means_no_params() -> Result<(), serde_json::Error> {
        assert_eq!(Params::new(&["a", "b"])?.as_json(), Some(r#"["a","b"]"#));
        assert_eq!(Params::new(&())?.as_json(), None);
        assert_eq!(Params::new(&None::<u8>)?.as_json(), None);
        let none = Params::none().to_rpc_params()?;
        let request = Request::borrowed("daemon/status", none.as_deref(), Id::Number(2));
        assert_eq!(serde_json::to_string(&request)?, r#"{"jsonrpc":"2.0","id":2,"method":"daemon/status"}"#);
        Ok(())
    }

    #[test]
    fn scalars_are_refused() {
        for value in [serde_json::json!("x"), serde_json::json!(1), serde_json::json!(true)] {
            let error = Params::new(&value).err().map(|e| e.to_string());
            assert_eq!(error.as_deref(), Some("JSON-RPC params must be an object or an array"), "{value}");
        }
    }
}
