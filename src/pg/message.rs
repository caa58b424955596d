//! The NUL-padded text buffers in shared memory that say why generation is
//! held, or why the registry's last call failed: fixed-size (shared memory
//! cannot grow), cut at a character boundary, read back as a `String`.
//! Callers hold the lock that guards their buffer.

/// Writes `text` into a NUL-padded buffer, cut at a character boundary to
/// fit (always leaving a final NUL).
pub fn set_message(buffer: &mut [u8], text: &str) {
    let mut n = text.len().min(buffer.len().saturating_sub(1));
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    buffer.fill(0);
    buffer[..n].copy_from_slice(&text.as_bytes()[..n]);
}

/// The text in a NUL-padded buffer written by [`set_message`].
pub fn message_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_cuts_at_a_character_boundary() {
        let mut buffer = [0xffu8; 8];
        set_message(&mut buffer, "held");
        assert_eq!(message_text(&buffer), "held");
        // 7 bytes fit; "ééé" + "é" is 8 bytes: the fourth 'é' is cut whole.
        set_message(&mut buffer, "aéééé");
        assert_eq!(message_text(&buffer), "aééé");
        assert_eq!(buffer[7], 0);
        set_message(&mut buffer, "");
        assert_eq!(message_text(&buffer), "");
    }
}
