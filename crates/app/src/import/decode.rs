//! Bytes of an import file → text, in the encodings clinics' tools write.
//!
//! Spanish Excel saves "CSV" in Windows-1252 and "Unicode text" in UTF-16LE
//! with a byte-order mark; editors and booking systems write UTF-8, with or
//! without one. The order of the checks is what makes the guess safe:
//! a byte-order mark is decisive; without one, valid UTF-8 is UTF-8
//! (Windows-1252 text with accents is almost never valid UTF-8); anything
//! else is read as Windows-1252, which assigns a character to every byte.
//! Two cases are refused with the line, never guessed: NUL bytes (UTF-16
//! saved without its mark reads as "valid UTF-8" full of NULs) and a file
//! that mixes UTF-8 accents with bytes that are not UTF-8 (reading it as
//! Windows-1252 would silently turn every "ñ" into "Ã±").
//!
//! Line endings are bytes the decoders keep, so line numbers counted in
//! the text are the file's physical lines.

use std::fmt;

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE, WINDOWS_1252};
use serde::Serialize;

/// The encoding a file was read in, as the import report names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum TextEncoding {
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    /// UTF-8 starting with a byte-order mark (Excel's "CSV UTF-8").
    #[serde(rename = "utf-8-bom")]
    Utf8Bom,
    /// UTF-16 little-endian with a byte-order mark (Excel's "Unicode text").
    #[serde(rename = "utf-16le")]
    Utf16Le,
    #[serde(rename = "utf-16be")]
    Utf16Be,
    /// Not valid UTF-8 and no byte-order mark: Spanish Excel's "CSV".
    #[serde(rename = "windows-1252")]
    Windows1252,
}

impl TextEncoding {
    pub fn as_str(self) -> &'static str {
        match self {
            TextEncoding::Utf8 => "utf-8",
            TextEncoding::Utf8Bom => "utf-8-bom",
            TextEncoding::Utf16Le => "utf-16le",
            TextEncoding::Utf16Be => "utf-16be",
            TextEncoding::Windows1252 => "windows-1252",
        }
    }

    /// Anything but plain UTF-8 came from a Windows tool (Excel).
    pub fn is_plain_utf8(self) -> bool {
        self == TextEncoding::Utf8
    }
}

impl fmt::Display for TextEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a file could not be read as text, at which physical line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub line: usize,
    pub reason: String,
}

/// Decodes a whole file; the byte-order mark, if any, is not part of the
/// text.
pub fn decode(bytes: &[u8]) -> Result<(String, TextEncoding), DecodeError> {
    if let Some((enc, bom_len)) = Encoding::for_bom(bytes) {
        let body = &bytes[bom_len..];
        let which = if enc == UTF_8 {
            TextEncoding::Utf8Bom
        } else if enc == UTF_16LE {
            TextEncoding::Utf16Le
        } else {
            debug_assert!(enc == UTF_16BE);
            TextEncoding::Utf16Be
        };
        return match enc.decode_without_bom_handling_and_without_replacement(body) {
            Some(text) => no_nul(text.into_owned(), which),
            None => {
                // Where: the first replacement character of a lenient decode.
                let (lossy, _) = enc.decode_without_bom_handling(body);
                let at = lossy.find('\u{fffd}').unwrap_or(0);
                Err(DecodeError {
                    line: line_at(lossy.as_bytes(), at),
                    reason: format!(
                        "the file starts with a {} byte-order mark but is not valid {}",
                        enc.name(),
                        enc.name()
                    ),
                })
            }
        };
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return no_nul(text.to_string(), TextEncoding::Utf8);
    }
    let bad = first_invalid_utf8(bytes);
    if let Some(utf8_at) = first_utf8_multibyte(bytes) {
        return Err(DecodeError {
            line: line_at(bytes, bad),
            reason: format!(
                "byte 0x{:02X} is not UTF-8, but line {} holds UTF-8 text: the file mixes encodings; \
                 save it again as \"CSV UTF-8\"",
                bytes[bad],
                line_at(bytes, utf8_at)
            ),
        });
    }
    // Windows-1252 maps every byte to a character: this cannot fail.
    let (text, _) = WINDOWS_1252.decode_without_bom_handling(bytes);
    no_nul(text.into_owned(), TextEncoding::Windows1252)
}

/// A NUL is never part of a booking export: refuse rather than hand the
/// readers a UTF-16 file without its byte-order mark as garbled UTF-8.
fn no_nul(text: String, enc: TextEncoding) -> Result<(String, TextEncoding), DecodeError> {
    match text.find('\0') {
        None => Ok((text, enc)),
        Some(at) => Err(DecodeError {
            line: line_at(text.as_bytes(), at),
            reason: format!(
                "NUL bytes in a file read as {enc}: UTF-16 without a byte-order mark? \
                 save it as \"CSV UTF-8\" or Excel's \"Unicode text\""
            ),
        }),
    }
}

/// 1-based physical line of byte offset `at`.
fn line_at(bytes: &[u8], at: usize) -> usize {
    bytes[..at.min(bytes.len())].iter().filter(|b| **b == b'\n').count() + 1
}

fn first_invalid_utf8(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) => e.valid_up_to(),
    }
}

/// The offset of the first non-ASCII character that is valid UTF-8.
fn first_utf8_multibyte(bytes: &[u8]) -> Option<usize> {
    let mut offset = 0;
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid();
        if let Some(i) = valid.bytes().position(|b| !b.is_ascii()) {
            return Some(offset + i);
        }
        offset += valid.len() + chunk.invalid().len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16(text: &str, le: bool) -> Vec<u8> {
        let mut out = if le { vec![0xFF, 0xFE] } else { vec![0xFE, 0xFF] };
        for u in text.encode_utf16() {
            out.extend(if le { u.to_le_bytes() } else { u.to_be_bytes() });
        }
        out
    }

    #[test]
    fn each_encoding_is_recognised_and_the_mark_dropped() {
        let text = "ref,name\ncita-1,Peña José\n";
        assert_eq!(decode(text.as_bytes()).unwrap(), (text.into(), TextEncoding::Utf8));
        let bom = [b"\xEF\xBB\xBF".as_slice(), text.as_bytes()].concat();
        assert_eq!(decode(&bom).unwrap(), (text.into(), TextEncoding::Utf8Bom));
        assert_eq!(
            decode(&utf16(text, true)).unwrap(),
            (text.into(), TextEncoding::Utf16Le)
        );
        assert_eq!(
            decode(&utf16(text, false)).unwrap(),
            (text.into(), TextEncoding::Utf16Be)
        );
        let latin = b"ref,name\ncita-1,Pe\xF1a Jos\xE9 \x80\n";
        assert_eq!(
            decode(latin).unwrap(),
            ("ref,name\ncita-1,Peña José €\n".into(), TextEncoding::Windows1252)
        );
    }

    #[test]
    fn guesses_that_would_garble_names_are_refused_with_the_line() {
        let mixed = b"ref,name\ncita-1,Pe\xC3\xB1a\ncita-2,Jos\xE9\n";
        let e = decode(mixed).unwrap_err();
        assert_eq!(e.line, 3, "{e:?}");
        assert!(e.reason.contains("0xE9") && e.reason.contains("line 2"), "{e:?}");

        let no_bom: Vec<u8> = utf16("ref\ncita-1\n", true)[2..].to_vec();
        let e = decode(&no_bom).unwrap_err();
        assert!(e.reason.contains("NUL"), "{e:?}");

        // An unpaired surrogate on line 2 of a UTF-16LE file.
        let mut broken = utf16("ref\n", true);
        broken.extend([0x00, 0xD8, b'x', 0x00]);
        let e = decode(&broken).unwrap_err();
        assert_eq!((e.line, e.reason.contains("UTF-16LE")), (2, true), "{e:?}");
    }

    #[test]
    fn crlf_endings_survive_every_decoder() {
        let text = "a\r\nb\r\n";
        for bytes in [text.as_bytes().to_vec(), utf16(text, true), utf16(text, false)] {
            assert_eq!(decode(&bytes).unwrap().0, text);
        }
    }
}
