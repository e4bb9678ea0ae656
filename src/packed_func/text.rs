//! Small text helpers shared by the rooms: one out-of-line copy of each, called from the
//! many places that build messages and names piece by piece.

/// `s` as an owned string (one out-of-line copy of the conversion for its many callers).
#[inline(never)]
pub(crate) fn owned(s: &str) -> String {
    s.to_string()
}

/// Appends `s` (one out-of-line copy of the string append for the many pieces).
#[inline(never)]
pub(crate) fn push(os: &mut String, s: &str) {
    os.push_str(s);
}

/// Appends `v` in decimal, as `{v}` would, without the formatting machinery.
#[inline(never)]
pub(crate) fn push_dec(os: &mut String, mut v: u32) {
    let mut buf = [0u8; 10];
    let mut i = buf.len();
    for slot in buf.iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        i -= 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // The digits are ASCII.
    os.push_str(std::str::from_utf8(buf.get(i..).unwrap_or_default()).unwrap_or_default());
}

/// The byte offset of the first `needle` (non-empty) in `hay`: a plain scan, so that no `&str`
/// pattern searcher is in the library for the few short needles the rooms look for.
#[inline(never)]
pub(crate) fn find(hay: &str, needle: &str) -> Option<usize> {
    let n = needle.as_bytes();
    hay.as_bytes().windows(n.len()).position(|w| w == n)
}

/// A file's text, as `std::fs::read_to_string` reads it (`None` where that fails), through
/// `std::fs::read`: one file-reading routine in the library instead of two.
#[inline(never)]
pub(crate) fn read_file_text(path: &std::path::Path) -> Option<String> {
    String::from_utf8(std::fs::read(path).ok()?).ok()
}

/// Parses an unsigned decimal at most `max` the way `str::parse` does for unsigned integers
/// (one leading `+` allowed, then at least one digit and nothing else); `None` otherwise.
#[inline(never)]
pub(crate) fn parse_dec(s: &str, max: u32) -> Option<u32> {
    let digits = s.strip_prefix('+').unwrap_or(s).as_bytes();
    if digits.is_empty() {
        return None;
    }
    let mut v: u32 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u32::from(d - b'0'))?;
        if v > max {
            return None;
        }
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_matches_std() {
        for hay in [
            "",
            ":",
            ": ",
            "a: b: c",
            "x:y",
            "texture",
            "global.texture-nhwc",
            "é: ü",
        ] {
            for needle in [": ", "texture", "layout", "é"] {
                assert_eq!(find(hay, needle), hay.find(needle), "{hay} {needle}");
            }
        }
    }

    #[test]
    fn decimals_match_std() {
        for v in [0u32, 1, 9, 10, 99, 255, 256, 65535, u32::MAX] {
            let mut s = String::from("x");
            push_dec(&mut s, v);
            assert_eq!(s, format!("x{v}"));
        }
        for s in [
            "",
            "+",
            "-",
            "-0",
            "+0",
            "0",
            "8",
            "08",
            "255",
            "256",
            "65535",
            "65536",
            "1a",
            " 1",
            "++1",
            "99999999999",
            "4294967295",
            "+4294967295",
            "4294967296",
        ] {
            assert_eq!(parse_dec(s, u32::MAX), s.parse::<u32>().ok(), "{s}");
            assert_eq!(
                parse_dec(s, 255),
                s.parse::<u8>().ok().map(u32::from),
                "{s}"
            );
            assert_eq!(
                parse_dec(s, 65535),
                s.parse::<u16>().ok().map(u32::from),
                "{s}"
            );
        }
    }
}
