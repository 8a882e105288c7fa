//! Text that came from the peer, made safe to show a person.
//!
//! A refusal reason, an abort reason, a saved path or a file name is chosen by whoever is at the
//! other end. Printed raw, `ESC [2J` clears the screen, `ESC ] 0;…BEL` retitles the terminal and
//! U+202E (right-to-left override) makes `evil\u{202e}txt.exe` read as `evilexe.txt`. Everything
//! printed from a peer goes through [`Peer`], which writes each control (Cc), format (Cf, where
//! the bidi controls are), line or paragraph separator as a visible `\u{…}` escape, the way
//! Rust's `{:?}` does. JSON keeps such characters exact with its own `\u` escapes
//! ([`json_inert`]), so a parser reads the value unchanged and a terminal shows it inert.

use std::borrow::Cow;
use std::fmt;

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// True for a character a terminal acts on or that changes how the text around it reads:
/// controls, format characters (bidi overrides, zero-width joiners, soft hyphens, tags) and
/// line or paragraph separators.
pub fn is_active(c: char) -> bool {
    matches!(
        c.general_category(),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// Letters and symbols that draw as blank space without being space: a name made of them
/// looks empty or like another.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{2800}' | '\u{180E}'
    )
}

/// Characters that look like a path separator (`/` or `\`) without being one.
pub const SLASH_LOOKALIKES: [char; 18] = [
    '\\', '\u{0337}', '\u{0338}', '\u{1735}', '\u{2044}', '\u{2215}', '\u{2216}', '\u{2571}',
    '\u{2572}', '\u{27CB}', '\u{27CD}', '\u{29F5}', '\u{29F8}', '\u{29F9}', '\u{2F03}', '\u{3033}',
    '\u{FE68}', '\u{FF0F}',
];

/// True for a slash or backslash look-alike, the fullwidth reverse solidus included.
pub fn is_slash_lookalike(c: char) -> bool {
    SLASH_LOOKALIKES.contains(&c) || c == '\u{FF3C}'
}

/// Displays peer text with every [`is_active`] character escaped as `\u{…}`.
pub struct Peer<'a>(pub &'a str);

impl fmt::Display for Peer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(is_active) {
            f.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().expect("found above");
            write!(f, "\\u{{{:x}}}", c as u32)?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

/// Peer text with active characters escaped; borrowed when there are none.
pub fn peer(s: &str) -> Cow<'_, str> {
    if s.contains(is_active) {
        Cow::Owned(Peer(s).to_string())
    } else {
        Cow::Borrowed(s)
    }
}

/// A serialized JSON document with every [`is_active`] character that serde left raw (it
/// escapes only U+0000 to U+001F) written as a `\uXXXX` escape (a surrogate pair above the
/// BMP). Such characters can only stand inside strings, so the document means the same; the
/// newlines and indentation of a pretty-printed document stay as they are.
pub fn json_inert(json: String) -> String {
    // Raw newlines and tabs are the document's own layout: serde escapes them inside strings.
    let escape = |c: char| is_active(c) && !matches!(c, '\n' | '\t' | '\r');
    if !json.contains(escape) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if escape(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{:04x}", u));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Escape sequences, bidi controls and separators come out inert; plain text, accents and
    /// emoji are untouched.
    #[test]
    fn active_characters_are_escaped() {
        assert_eq!(
            Peer("a\u{1b}[2J\u{7}b\u{202e}c\u{2028}d\u{ad}").to_string(),
            "a\\u{1b}[2J\\u{7}b\\u{202e}c\\u{2028}d\\u{ad}"
        );
        assert_eq!(peer("plain é 🦀 text"), "plain é 🦀 text");
        assert!(matches!(peer("plain"), Cow::Borrowed(_)));
        assert_eq!(peer("tag\u{E0041}"), "tag\\u{e0041}");
    }

    /// JSON escapes keep the value: parsing the inert document gives back the original string.
    #[test]
    fn json_stays_exact() {
        let original = "x\u{1b}y\u{202e}z\u{7f}\u{E0041}\u{2066}";
        let doc = json_inert(serde_json::to_string_pretty(&[original]).unwrap());
        assert!(!doc.contains(|c| is_active(c) && c != '\n'), "{doc}");
        let back: Vec<String> = serde_json::from_str(&doc).unwrap();
        assert_eq!(back, [original]);
    }

    /// The characters the first save-name filter missed are all caught.
    #[test]
    fn missed_characters_are_caught() {
        for c in [
            '\u{00AD}', '\u{061C}', '\u{180E}', '\u{200E}', '\u{2066}', '\u{FFF9}',
        ] {
            assert!(is_active(c) || is_invisible(c), "U+{:04X}", c as u32);
        }
        assert!(is_invisible('\u{3164}'));
        for c in ['\u{2216}', '\u{2571}', '\u{27CB}', '\u{FE68}', '\u{FF3C}'] {
            assert!(is_slash_lookalike(c), "U+{:04X}", c as u32);
        }
        assert!(!is_active('a') && !is_invisible(' ') && !is_slash_lookalike('-'));
    }
}
