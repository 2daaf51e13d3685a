//! The HTML of the authorization page: who asks (the client's registered name), for
//! what (scope svc:read, read-only), and a form that takes the user's personal access
//! token. Every interpolated value is escaped; the page refuses framing and caching.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;line-height:1.5}\
input[type=password]{width:100%;padding:.5rem;font-family:monospace}button{padding:.5rem 1rem;margin:.75rem .5rem 0 0}\
.error{color:#a00}code{background:#eee;padding:0 .25rem}";

/// The consent page. `fields` are the authorization request's parameters, carried as
/// hidden inputs so the POST needs no server-side session.
/// `redirect_host` is where approving sends the browser: shown, and flagged when it is
/// this machine (any local program could be listening there). `publisher` is the host
/// of a client metadata document: its name is only what that host says it is.
pub fn consent(status: StatusCode, client_name: &str, publisher: Option<&str>, redirect_host: &str, fields: &[(&str, &str)], error: Option<&str>) -> Response {
    let mut hidden = String::new();
    for (name, value) in fields {
        hidden.push_str(&format!("<input type=\"hidden\" name=\"{}\" value=\"{}\">\n", escape(name), escape(value)));
    }
    let error = error.map(|error| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(error))).unwrap_or_default();
    let local = matches!(redirect_host, "localhost" | "127.0.0.1" | "[::1]");
    let warning = if local { " This is an application on this computer: approve only if you just started it." } else { "" };
    let publisher = publisher
        .map(|host| {
            format!("<p>This client describes itself at <strong id=\"client-host\">{}</strong>; the name above is what that site says.</p>\n", escape(host))
        })
        .unwrap_or_default();
    let destination = format!("<p>Approving sends you back to <strong id=\"redirect-host\">{}</strong>.{warning}</p>", escape(redirect_host));
    html(
        status,
        format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
<title>Authorize {name}</title><style>{STYLE}</style></head><body>\n\
<h1>Authorize <span id=\"client-name\">{name}</span></h1>\n\
<p><strong>{name}</strong> asks for read-only access to your meetings and the notes shared with you (scope <code id=\"scope\">svc:read</code>).</p>\n\
{publisher}{destination}\n{error}\n\
<form method=\"POST\" action=\"authorize\">\n{hidden}\
<label for=\"pat\">Your personal access token (Settings, Developers, MCP)</label>\n\
<input type=\"password\" id=\"pat\" name=\"pat\" autocomplete=\"off\" placeholder=\"svc_pat_…\" required>\n\
<button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button>\
<button type=\"submit\" name=\"decision\" value=\"deny\" formnovalidate>Deny</button>\n\
</form>\n<p>Revoking this token later also disconnects {name}.</p>\n</body></html>\n",
            name = escape(client_name),
        ),
    )
}

/// An invalid authorization request of a known client, found before the user acted:
/// the OAuth error and its description, and, when `back` gives one, a link to the
/// client's redirect URI carrying the error (with the host it goes to), which the user
/// may follow. Never an automatic redirect (RFC 9700 §4.11.2).
pub fn request_error(status: StatusCode, code: &str, description: &str, back: Option<(&str, &str)>) -> Response {
    let link = back
        .map(|(link, host)| {
            format!(
                "<p><a id=\"return\" href=\"{}\">Return to the application</a> at <strong id=\"redirect-host\">{}</strong> and tell it.</p>\n",
                escape(link),
                escape(host)
            )
        })
        .unwrap_or_default();
    html(
        status,
        format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Authorization failed</title><style>{STYLE}</style></head><body>\n\
<h1>Authorization failed</h1>\n<p class=\"error\" role=\"alert\"><code id=\"error\">{}</code>: {}</p>\n{link}</body></html>\n",
            escape(code),
            escape(description)
        ),
    )
}

/// An error that must not redirect (unknown client, unregistered redirect URI).
pub fn error(status: StatusCode, message: &str) -> Response {
    html(
        status,
        format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Authorization failed</title><style>{STYLE}</style></head><body>\n\
<h1>Authorization failed</h1>\n<p class=\"error\" role=\"alert\">{}</p>\n</body></html>\n",
            escape(message)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("<script>\"x\"&'"), "&lt;script&gt;&quot;x&quot;&amp;&#39;");
    }
}
