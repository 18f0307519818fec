//! base64 (RFC 4648) for the built-ins: standard with padding (`read_file`'s `base64`
//! encoding) and unpadded base64url (paging cursors), one encoder for both alphabets.

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Standard base64 (RFC 4648 §4, with padding).
pub(crate) fn standard(bytes: &[u8]) -> String {
    encode(bytes, STANDARD, true)
}

/// base64url without padding (RFC 4648 §5).
pub(crate) fn url(bytes: &[u8]) -> String {
    encode(bytes, URL, false)
}

fn encode(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let symbol = |n: u32, shift: u32| char::from(alphabet[((n >> shift) & 63) as usize]);
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        out.push(symbol(n, 18));
        out.push(symbol(n, 12));
        for (present, shift) in [(chunk.len() > 1, 6), (chunk.len() > 2, 0)] {
            if present {
                out.push(symbol(n, shift));
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes unpadded base64url; `None` for any other text (including non-canonical trailing
/// bits, so one token has exactly one spelling).
pub(crate) fn decode_url(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| URL.iter().position(|&a| a == c).map(|v| v as u32);
    let bytes = text.as_bytes();
    if bytes.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3 + 2);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        let produced = chunk.len() - 1;
        let unused_bits = (8 * (3 - produced)) as u32;
        if n & ((1 << unused_bits) - 1) != 0 {
            return None;
        }
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..produced]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, want) in cases {
            assert_eq!(standard(input.as_bytes()), want, "{input:?}");
        }
        assert_eq!(standard(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn url_round_trips_without_padding() {
        for len in 0..40u8 {
            let bytes: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
            let text = url(&bytes);
            assert!(!text.contains('='), "{text}");
            assert_eq!(decode_url(&text), Some(bytes));
        }
    }
}
