//! Phone masking for anything a person reads on screen or in logs.

/// `+51987654321` → `+51 9•• ••• 321`: the country code, the first and the
/// last three digits, enough to match a phone call, not to copy a number.
pub fn mask_phone(phone: &str) -> String {
    let digits: Vec<char> = phone.chars().filter(|c| c.is_ascii_digit()).collect();
    if digits.len() < 7 {
        return "•".repeat(digits.len().max(3));
    }
    // Country codes are 1–3 digits; Peru's (51) is the common case here.
    let cc = if phone.starts_with("+51") || digits.len() > 11 {
        2
    } else {
        (digits.len() - 9).clamp(1, 3)
    };
    let rest = &digits[cc..];
    let first = rest[0];
    let last: String = rest[rest.len() - 3..].iter().collect();
    let hidden = rest.len() - 4;
    let mut masked = String::new();
    for i in 0..hidden {
        if i == 2 {
            masked.push(' ');
        }
        masked.push('•');
    }
    let cc: String = digits[..cc].iter().collect();
    format!("+{cc} {first}{masked} {last}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peruvian_mobiles_are_masked_as_designed() {
        assert_eq!(mask_phone("+51987654321"), "+51 9•• ••• 321");
    }

    #[test]
    fn short_or_odd_input_never_leaks() {
        assert_eq!(mask_phone("123"), "•••");
        assert!(!mask_phone("+14155550123").contains("555"));
    }
}
