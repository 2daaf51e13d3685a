//! The HTML of the authorization page: who asks (the client's registered name, marked
//! unverified for a self-registered client, or with the host that publishes its
//! metadata document), for what (scope svc:read, read-only), where approving sends the
//! browser, and a form that takes the user's personal access token. A client's name is
//! shown without control and bidirectional-formatting characters ([`display_name`]);
//! every interpolated value is escaped; the page refuses framing and caching.

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

/// Whether a character may change how the text around it is shown without being seen
/// itself: C0 and C1 controls, the bidirectional formatting characters (U+061C, U+200E,
/// U+200F, U+202A to U+202E, U+2066 to U+2069, which can make `evil.com/moc.elgoog` read
/// backwards), zero-width characters, line and paragraph separators and the BOM.
pub fn is_deceptive(character: char) -> bool {
    character.is_control()
        || matches!(character, '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// A client's name as it may be shown: deceptive characters ([`is_deceptive`]) removed,
/// whitespace of any kind (line breaks included) made single spaces, trimmed. `None` when nothing is left.
pub fn display_name(name: &str) -> Option<String> {
    let cleaned: String = name
        .chars()
        .filter_map(|character| match character {
            // A line break or tab is a space, not nothing: "a\nb" is two words.
            _ if character.is_whitespace() => Some(' '),
            _ if is_deceptive(character) => None,
            _ => Some(character),
        })
        .collect();
    let shown = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    (!shown.is_empty()).then_some(shown)
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
/// this machine (`local`: any local program could be listening there; the security
/// considerations of MCP's authorization ask for a warning on such redirect URIs). `publisher` is the host
/// of a client metadata document: its name is only what that host says it is.
pub fn consent(
    status: StatusCode,
    client_name: &str,
    publisher: Option<&str>,
    redirect_host: &str,
    local: bool,
    fields: &[(&str, &str)],
    error: Option<&str>,
) -> Response {
    let mut hidden = String::new();
    for (name, value) in fields {
        hidden.push_str(&format!("<input type=\"hidden\" name=\"{}\" value=\"{}\">\n", escape(name), escape(value)));
    }
    let error = error.map(|error| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(error))).unwrap_or_default();
    let warning = if local { " This is an application on this computer: approve only if you just started it." } else { "" };
    let publisher = match publisher {
        Some(host) => {
            format!("<p>This client describes itself at <strong id=\"client-host\">{}</strong>; the name above is what that site says.</p>\n", escape(host))
        }
        None => "<p id=\"client-unverified\"><strong>Unverified client.</strong> This application registered itself: its name is what it calls itself, \
and nobody has checked it. Approve only if you just connected it.</p>\n"
            .to_string(),
    };
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

    #[test]
    fn display_names_lose_controls_and_bidi_overrides() {
        assert_eq!(display_name("Claude\u{202E}gnp.exe").as_deref(), Some("Claudegnp.exe"));
        assert_eq!(display_name("a\u{0}b\u{1b}[31mc\u{7f}\u{85}").as_deref(), Some("ab[31mc"));
        assert_eq!(display_name(" Line\none\u{2028}two\t ").as_deref(), Some("Line one two"));
        assert_eq!(display_name("\u{2066}\u{200B}\u{FEFF}"), None);
        assert_eq!(display_name("Café 東京 ☕").as_deref(), Some("Café 東京 ☕"));
    }
}
