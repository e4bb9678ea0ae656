//! Floats as text: the shortest decimal digits that read back to an `f64`, and the two layouts
//! Rust's formatter gives them (`{}` and `{:?}`), byte for byte.
//!
//! core prints floats through Grisu with a Dragon4 fallback, about 20 KB of code and tables in
//! a library that prints a float only in error messages and JSON. This is the free-format
//! algorithm of Steele & White as Burger & Dybvig state it, on exact big integers: slower (a
//! few microseconds a float), and a tenth of the size. The digits are the ones core chooses:
//! the fewest that read back to the value (boundaries included when the mantissa is even, as
//! the round-to-even reader decides), the nearest of those, and the upper one on a tie.

/// The limbs of [`Big`]: 1,280 bits, more than the largest scaled value needs (about
/// 2^1130, for the smallest subnormals).
const LIMBS: usize = 40;

/// A non-negative integer of [`LIMBS`] 32-bit limbs, least significant first.
#[derive(Clone, Copy)]
struct Big([u32; LIMBS]);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big([0; LIMBS]);
        b.0[0] = v as u32;
        b.0[1] = (v >> 32) as u32;
        b
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in self.0.iter_mut() {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
    }

    fn mul_pow2(&mut self, k: u32) {
        for _ in 0..k / 31 {
            self.mul_small(1 << 31);
        }
        self.mul_small(1 << (k % 31));
    }

    fn mul_pow10(&mut self, k: u32) {
        for _ in 0..k / 9 {
            self.mul_small(1_000_000_000);
        }
        self.mul_small(10u32.pow(k % 9));
    }

    fn add(&mut self, o: &Big) {
        let mut carry = 0u64;
        for (l, r) in self.0.iter_mut().zip(o.0.iter()) {
            let v = u64::from(*l) + u64::from(*r) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
    }

    /// `self - o`, for `self >= o`.
    fn sub(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for (l, r) in self.0.iter_mut().zip(o.0.iter()) {
            let v = i64::from(*l) - i64::from(*r) - borrow;
            *l = v as u32;
            borrow = (v < 0) as i64;
        }
    }

    fn cmp(&self, o: &Big) -> std::cmp::Ordering {
        self.0.iter().rev().cmp(o.0.iter().rev())
    }
}

/// `a + b` compared with `c`.
fn sum_cmp(a: &Big, b: &Big, c: &Big) -> std::cmp::Ordering {
    let mut s = *a;
    s.add(b);
    s.cmp(c)
}

/// The shortest digits of a positive finite `v`: `(digits, count, k)` with
/// `v ≈ 0.d₁d₂…dₙ × 10^k`.
pub(crate) fn shortest(v: f64) -> ([u8; 17], usize, i32) {
    use std::cmp::Ordering::{Greater, Less};
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (f, e) = if biased == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, biased - 1075)
    };
    // The value is r / s; the gaps to its neighbours are m+ / s above and m- / s below
    // (halved: the boundaries are the midpoints).
    let lowest_of_binade = f == 1 << 52 && biased > 1;
    let (mut r, mut s, mut mp, mut mm) = (
        Big::from_u64(f),
        Big::from_u64(1),
        Big::from_u64(1),
        Big::from_u64(1),
    );
    let shift = if lowest_of_binade { 2 } else { 1 };
    r.mul_pow2(shift);
    s.mul_pow2(shift);
    if lowest_of_binade {
        mp.mul_pow2(1);
    }
    if e >= 0 {
        r.mul_pow2(e as u32);
        mp.mul_pow2(e as u32);
        mm.mul_pow2(e as u32);
    } else {
        s.mul_pow2(e.unsigned_abs());
    }
    // A lower estimate of k (log10(2) ≈ 78913 / 2^18), raised below until v + m+ < 10^k.
    let nbits = 64 - f.leading_zeros() as i32;
    let mut k = (((e + nbits - 1) as i64 * 78913) >> 18) as i32 - 1;
    if k >= 0 {
        s.mul_pow10(k as u32);
    } else {
        let up = k.unsigned_abs();
        r.mul_pow10(up);
        mp.mul_pow10(up);
        mm.mul_pow10(up);
    }
    let even = f % 2 == 0;
    // The high boundary reads back to v when the mantissa is even (round half to even).
    let too_high = |r: &Big, mp: &Big, s: &Big| match sum_cmp(r, mp, s) {
        Greater => true,
        std::cmp::Ordering::Equal => even,
        Less => false,
    };
    while too_high(&r, &mp, &s) {
        s.mul_small(10);
        k += 1;
    }
    let mut digits = [0u8; 17];
    let mut n = 0;
    loop {
        r.mul_small(10);
        mp.mul_small(10);
        mm.mul_small(10);
        let mut d = 0u8;
        while r.cmp(&s) != Less {
            r.sub(&s);
            d += 1;
        }
        let low = match r.cmp(&mm) {
            Less => true,
            std::cmp::Ordering::Equal => even,
            Greater => false,
        };
        let high = too_high(&r, &mp, &s);
        if !low && !high && n < 16 {
            digits[n] = d;
            n += 1;
            continue;
        }
        // The last digit: d, or d + 1 when that is nearer (or the only one in range); on a
        // tie, the upper.
        let up = if low && high {
            let mut twice = r;
            twice.add(&r);
            twice.cmp(&s) != Less
        } else {
            high
        };
        digits[n] = d + up as u8;
        n += 1;
        break;
    }
    // A carry out of a last digit of 9 (kept for safety: the fix-up above prevents it).
    let mut i = n;
    while i > 0 && digits[i - 1] == 10 {
        digits[i - 1] = 0;
        i -= 1;
        if i > 0 {
            digits[i - 1] += 1;
        } else {
            digits[0] = 1;
            k += 1;
        }
    }
    while n > 1 && digits[n - 1] == 0 {
        n -= 1;
    }
    for d in &mut digits[..n] {
        *d += b'0';
    }
    (digits, n, k)
}

fn push_zeros(out: &mut String, n: i32) {
    for _ in 0..n {
        out.push('0');
    }
}

fn push_digits(out: &mut String, d: &[u8]) {
    // Digits are ASCII.
    out.push_str(std::str::from_utf8(d).unwrap_or_default());
}

/// Writes the sign, and NaN, an infinity or zero (`zero`) as core writes them; false when
/// `v` is finite and non-zero (its magnitude is then to be written).
fn special(v: f64, out: &mut String, zero: &str) -> bool {
    if v.is_nan() {
        out.push_str("NaN");
        return true;
    }
    if v.is_sign_negative() {
        out.push('-');
    }
    if v.is_infinite() {
        out.push_str("inf");
        true
    } else if v == 0.0 {
        out.push_str(zero);
        true
    } else {
        false
    }
}

/// The digits in fixed notation with at least `min_frac` fraction digits.
fn write_fixed(v: f64, out: &mut String, min_frac: i32) {
    let (d, n, k) = shortest(v.abs());
    let d = &d[..n];
    let n = n as i32;
    if k <= 0 {
        out.push_str("0.");
        push_zeros(out, -k);
        push_digits(out, d);
        push_zeros(out, min_frac - (n - k));
    } else if k < n {
        let (int, frac) = d.split_at(k as usize);
        push_digits(out, int);
        out.push('.');
        push_digits(out, frac);
        push_zeros(out, min_frac - (n - k));
    } else {
        push_digits(out, d);
        push_zeros(out, k - n);
        if min_frac > 0 {
            out.push('.');
            push_zeros(out, min_frac);
        }
    }
}

/// Appends `v` as `format!("{v}")` writes it.
#[cfg(any(test, feature = "relax"))]
pub(crate) fn write_display(v: f64, out: &mut String) {
    if !special(v, out, "0") {
        write_fixed(v, out, 0);
    }
}

/// Appends `v` as `format!("{v:?}")` writes it.
pub(crate) fn write_debug(v: f64, out: &mut String) {
    if special(v, out, "0.0") {
        return;
    }
    let a = v.abs();
    if (1e-4..1e16).contains(&a) {
        write_fixed(v, out, 1);
        return;
    }
    let (d, n, k) = shortest(a);
    push_digits(out, &d[..1]);
    if n > 1 {
        out.push('.');
        push_digits(out, &d[1..n]);
    }
    out.push('e');
    let x = k - 1;
    if x < 0 {
        out.push('-');
    }
    super::text::push_dec(out, x.unsigned_abs());
}

/// An `f64` that prints through this module (`{:?}` as core's `Debug`).
pub(crate) struct DebugF64(pub f64);

impl std::fmt::Debug for DebugF64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        write_debug(self.0, &mut s);
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(v: f64) {
        let mut s = String::new();
        write_display(v, &mut s);
        assert_eq!(s, format!("{v}"), "Display of {:#x}", v.to_bits());
        s.clear();
        write_debug(v, &mut s);
        assert_eq!(s, format!("{v:?}"), "Debug of {:#x}", v.to_bits());
    }

    #[test]
    fn as_core_prints_them() {
        let specials = [
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            f64::from_bits(1),
            f64::from_bits(0x000f_ffff_ffff_ffff),
            0.1,
            0.2,
            0.3,
            1.0 / 3.0,
            1.5,
            -2.5,
            100.0,
            1e15,
            1e16,
            1e-4,
            9.999e-5,
            123456789.125,
            5e-324,
            1.7976931348623157e308,
            2.2250738585072014e-308,
        ];
        for v in specials {
            check(v);
        }
        // Powers of two and ten, and their neighbours (the lowest mantissa of a binade has
        // a lower gap half the upper one).
        for e in -1074i32..=1023 {
            // 2^e from its bits (`powi` reaches 0 below 2^-1022 through an infinite 2^-e).
            let bits = if e >= -1022 {
                ((e + 1023) as u64) << 52
            } else {
                1u64 << (e + 1074)
            };
            for b in [bits, bits + 1, bits - 1] {
                check(f64::from_bits(b));
            }
        }
        for e in -325..=308 {
            let p: f64 = format!("1e{e}").parse().unwrap();
            check(p);
            check(f64::from_bits(p.to_bits() + 1));
            check(f64::from_bits(p.to_bits().saturating_sub(1)));
        }
        // The random and counted cases, fewer in slow builds (`packed_func::test_scale`).
        let scale = crate::packed_func::test_scale();
        // Integers, halves and short decimals.
        for i in 0..20_000 / scale {
            check(i as f64);
            check(i as f64 + 0.5);
            check(i as f64 / 1000.0);
        }
        // Random bit patterns (a fixed xorshift seed).
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..300_000 / scale {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(f64::from_bits(x));
        }
    }
}
