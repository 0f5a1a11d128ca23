//! One DevTools command sent through chromedriver (`POST /session/{id}/goog/cdp/execute`):
//! what WebDriver cannot do itself, such as reading and setting the cookies of every
//! domain at once.

use fantoccini::wd::WebDriverCompatibleCommand;
use serde_json::{json, Value};

/// `cmd` with `params`, for the session's browser.
#[derive(Debug)]
pub(crate) struct Cdp {
    pub(crate) cmd: &'static str,
    pub(crate) params: Value,
}

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        let session = session_id.unwrap_or_default();
        base_url.join(&format!("session/{session}/goog/cdp/execute"))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        let body = json!({ "cmd": self.cmd, "params": self.params });
        (http::Method::POST, Some(body.to_string()))
    }
}

/// The fields of a cookie that `Network.setCookies` takes back from `Network.getAllCookies`.
pub(crate) fn cookie_param(cookie: &Value) -> Value {
    let mut param = serde_json::Map::new();
    for field in [
        "name", "value", "domain", "path", "secure", "httpOnly", "sameSite",
    ] {
        if let Some(value) = cookie.get(field) {
            param.insert(field.to_owned(), value.clone());
        }
    }
    let session = cookie.get("session").and_then(Value::as_bool) == Some(true);
    if let (false, Some(expires)) = (session, cookie.get("expires")) {
        param.insert("expires".to_owned(), expires.clone());
    }
    Value::Object(param)
}
