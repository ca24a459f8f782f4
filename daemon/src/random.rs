//! Random bytes from the kernel (`getrandom(2)`), as lowercase hex: the one place the daemon
//! draws them, for its secrets (resume tokens, the gate token) and the names of its temporary
//! files.

/// `bytes` random bytes from `getrandom(2)` (retried when a signal interrupts it), as lowercase
/// hex: twice as many digits.
///
/// # Errors
/// When the kernel gives no randomness. A secret must then not be made at all; a caller that
/// only needs a name nobody else picks may fall back to something unique instead.
pub fn hex(bytes: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; bytes];
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(hex_of(&buf))
}

/// `bytes` in lowercase hex.
pub fn hex_of(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_two_digits_a_byte_and_never_the_same_twice() {
        assert_eq!(hex_of(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        let (a, b) = (hex(32).unwrap(), hex(32).unwrap());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)), "{a}");
        assert_ne!(a, b);
        assert_eq!(hex(0).unwrap(), "");
    }
}
