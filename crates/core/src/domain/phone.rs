//! Customers' phones: E.164 in shape, and a number its country holds.
//!
//! A message to a number no country holds can only fail, or reach a
//! stranger; so the phone of every booking event is checked against
//! libphonenumber's metadata (the `phonenumber` crate), not only its shape.

/// E.164: `+`, a non-zero country digit, 8 to 15 digits in all.
pub fn is_e164(phone: &str) -> bool {
    let Some(digits) = phone.strip_prefix('+') else {
        return false;
    };
    (8..=15).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit()) && !digits.starts_with('0')
}

/// A phone a message can be sent to: E.164-shaped, and a number
/// libphonenumber's metadata holds valid for its region (a known country
/// code, a length and a number range in use there), written in its one
/// E.164 form. `+999123456789` (no such country) and `+51000000000` (no
/// Peruvian number starts with 0) are refused, the reason naming the
/// phone and, when known, its region.
pub fn check_phone(phone: &str) -> Result<(), String> {
    if !is_e164(phone) {
        return Err(format!(
            "invalid E.164 phone {phone:?} (expected + and the country code, then digits only)"
        ));
    }
    let n = match phonenumber::parse(None, phone) {
        Ok(n) => n,
        Err(phonenumber::ParseError::InvalidCountryCode) => {
            return Err(format!("invalid phone {phone:?}: not a known country calling code"));
        }
        // The crate's other errors speak of its parser, not of phones.
        Err(_) => return Err(format!("invalid phone {phone:?}: not a valid phone number")),
    };
    let region = match n.country().id() {
        Some(id) => format!("{id:?}"),
        None => format!("+{}", n.country().code()),
    };
    // Valid (a number range in use in the region) and possible: a length
    // that numbers of its kind have there (checked apart, since the crate's
    // range patterns do not anchor their end).
    let db = &phonenumber::metadata::DATABASE;
    let digits = n.national().to_string().len();
    let possible = n
        .metadata(db)
        .and_then(|m| m.descriptors().get(n.number_type(db)))
        .is_some_and(|d| {
            d.possible_length().is_empty() || d.possible_length().iter().any(|&l| usize::from(l) == digits)
        });
    if !n.is_valid() || !possible {
        return Err(format!("invalid phone {phone:?}: not a valid number in {region}"));
    }
    let canonical = n.format().mode(phonenumber::Mode::E164).to_string();
    if canonical != phone {
        return Err(format!("invalid phone {phone:?}: its E.164 form is {canonical:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e164() {
        assert!(is_e164("+51987654321"));
        assert!(!is_e164("51987654321"));
        assert!(!is_e164("+0987654321"));
        assert!(!is_e164("+51 987 654 321"));
        assert!(!is_e164("+5198"));
    }

    #[test]
    fn phones_must_be_valid_numbers_of_their_region() {
        for ok in [
            "+51987654321",
            "+51911222333",
            "+5114567890",
            "+573001234567",
            "+34612345678",
        ] {
            assert_eq!(check_phone(ok), Ok(()), "{ok}");
        }
        let reason = |p: &str| check_phone(p).unwrap_err();
        assert_eq!(
            reason("+999123456789"),
            "invalid phone \"+999123456789\": not a known country calling code"
        );
        assert_eq!(
            reason("+51000000000"),
            "invalid phone \"+51000000000\": not a valid phone number"
        );
        assert_eq!(
            reason("+51100000000"),
            "invalid phone \"+51100000000\": not a valid number in PE"
        );
        assert!(
            reason("+5198765432").contains("not a valid number in PE"),
            "one digit short"
        );
        assert!(
            reason("+519876543210").contains("not a valid number in PE"),
            "one digit long"
        );
        assert!(reason("51987654321").starts_with("invalid E.164 phone"));
    }
}
