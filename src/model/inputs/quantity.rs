//! Parsing of Kubernetes resource quantities ("100m", "1.5Gi", "2e3", "4").
//!
//! The API server has already canonicalised every quantity it stores, but requests to the
//! extender can come from anything, so this parser is strict and its errors say what was wrong.
//! Values are kept as integers in the unit the ledger counts in: milli-units for CPU and other
//! fractional resources, whole units (bytes, devices) for everything else, rounded *up* the way
//! Kubernetes rounds a request (`Quantity.Value()` / `MilliValue()` round away from zero).

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses `s` and returns its value multiplied by `scale` (1 for whole units, 1000 for milli),
/// rounded up. Negative quantities are rejected: a request can never be negative.
pub fn parse_scaled(s: &str, scale: i128) -> Result<i64, QuantityError> {
    let err = |reason| QuantityError {
        input: s.to_string(),
        reason,
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(err("empty"));
    }
    let (sign, body) = match t.as_bytes()[0] {
        b'-' => (-1, &t[1..]),
        b'+' => (1, &t[1..]),
        _ => (1, t),
    };
    // Split the number from its suffix: digits and at most one '.'.
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(err("expected a decimal number"));
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // Value = mantissa * 10^exp10 * 2^exp2, computed exactly in i128 as a rational.
    let mut exp10: i32 = -(frac_part.len() as i32);
    let mut exp2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        s if s.starts_with(['e', 'E']) => {
            let e: i32 = s[1..].parse().map_err(|_| err("bad exponent after 'e'"))?;
            if !(-30..=30).contains(&e) {
                return Err(err("exponent out of range"));
            }
            exp10 += e;
        }
        _ => {
            return Err(err(
                "unknown suffix (use m, k, M, G, Ki, Mi, Gi, ... or e<N>)",
            ))
        }
    }
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(err("too many digits"));
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits
            .parse()
            .map_err(|_| err("expected a decimal number"))?
    };
    let overflow = || err("value too large");
    let mut numerator = mantissa
        .checked_mul(scale)
        .and_then(|v| v.checked_mul(1i128 << exp2))
        .ok_or_else(overflow)?;
    let mut denominator: i128 = 1;
    if exp10 >= 0 {
        numerator = numerator
            .checked_mul(10i128.checked_pow(exp10 as u32).ok_or_else(overflow)?)
            .ok_or_else(overflow)?;
    } else {
        denominator = 10i128
            .checked_pow((-exp10) as u32)
            .ok_or_else(|| err("value too small"))?;
    }
    let value = (numerator + denominator - 1) / denominator; // round up
    if sign < 0 && value != 0 {
        return Err(err("negative quantities are not allowed"));
    }
    i64::try_from(value).map_err(|_| overflow())
}

/// CPU-like quantity in milli-units ("100m" -> 100, "2" -> 2000).
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    parse_scaled(s, 1000)
}

/// Whole-unit quantity ("1Gi" -> 1073741824, "500m" -> 1: rounded up like Quantity.Value()).
pub fn parse_units(s: &str) -> Result<i64, QuantityError> {
    parse_scaled(s, 1)
}

#[cfg(test)]
mod tests;
