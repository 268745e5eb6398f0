//! A small exact-enough FFT for the signal ops: radix-2 for powers of two, a direct
//! transform for short odd lengths, Bluestein's chirp-z for the rest. All in f64 with
//! twiddles computed directly (no recurrences), unnormalized in both directions.

use std::f64::consts::PI;

/// A complex number in f64.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct C64 {
    pub re: f64,
    pub im: f64,
}

impl C64 {
    pub fn new(re: f64, im: f64) -> C64 {
        C64 { re, im }
    }
    fn mul(self, o: C64) -> C64 {
        C64::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
    fn add(self, o: C64) -> C64 {
        C64::new(self.re + o.re, self.im + o.im)
    }
    fn sub(self, o: C64) -> C64 {
        C64::new(self.re - o.re, self.im - o.im)
    }
    fn conj(self) -> C64 {
        C64::new(self.re, -self.im)
    }
    fn cis(angle: f64) -> C64 {
        C64::new(angle.cos(), angle.sin())
    }
}

/// Lengths up to this use the direct O(n^2) transform when not a power of two.
const DIRECT_MAX: usize = 64;

/// The discrete Fourier transform of `x` (`inverse`: with `e^{+i...}`, no 1/n).
pub(super) fn transform(x: &[C64], inverse: bool) -> Vec<C64> {
    let n = x.len();
    if n <= 1 {
        return x.to_vec();
    }
    if n.is_power_of_two() {
        let mut v = x.to_vec();
        radix2(&mut v, inverse);
        v
    } else if n <= DIRECT_MAX {
        direct(x, inverse)
    } else {
        bluestein(x, inverse)
    }
}

fn sign(inverse: bool) -> f64 {
    if inverse {
        1.0
    } else {
        -1.0
    }
}

fn direct(x: &[C64], inverse: bool) -> Vec<C64> {
    let n = x.len();
    let s = sign(inverse);
    let tw: Vec<C64> = (0..n)
        .map(|k| C64::cis(s * 2.0 * PI * k as f64 / n as f64))
        .collect();
    (0..n)
        .map(|k| {
            x.iter().enumerate().fold(C64::default(), |acc, (j, &v)| {
                acc.add(v.mul(tw[(j * k) % n]))
            })
        })
        .collect()
}

fn radix2(a: &mut [C64], inverse: bool) {
    let n = a.len();
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if i < j {
            a.swap(i, j);
        }
    }
    let s = sign(inverse);
    let mut len = 2;
    while len <= n {
        let half = len / 2;
        let tw: Vec<C64> = (0..half)
            .map(|k| C64::cis(s * 2.0 * PI * k as f64 / len as f64))
            .collect();
        for start in (0..n).step_by(len) {
            for k in 0..half {
                let u = a[start + k];
                let v = a[start + k + half].mul(tw[k]);
                a[start + k] = u.add(v);
                a[start + k + half] = u.sub(v);
            }
        }
        len *= 2;
    }
}

fn bluestein(x: &[C64], inverse: bool) -> Vec<C64> {
    let n = x.len();
    let m = (2 * n - 1).next_power_of_two();
    let s = sign(inverse);
    // w_k = e^{s i pi k^2 / n}, with k^2 reduced mod 2n to keep the angle small.
    let w: Vec<C64> = (0..n)
        .map(|k| {
            let k2 = (k as u128 * k as u128 % (2 * n as u128)) as f64;
            C64::cis(s * PI * k2 / n as f64)
        })
        .collect();
    let mut a = vec![C64::default(); m];
    for k in 0..n {
        a[k] = x[k].mul(w[k]);
    }
    let mut b = vec![C64::default(); m];
    b[0] = w[0].conj();
    for k in 1..n {
        b[k] = w[k].conj();
        b[m - k] = w[k].conj();
    }
    radix2(&mut a, false);
    radix2(&mut b, false);
    for (p, q) in a.iter_mut().zip(&b) {
        *p = p.mul(*q);
    }
    radix2(&mut a, true);
    let scale = 1.0 / m as f64;
    (0..n)
        .map(|k| {
            let c = C64::new(a[k].re * scale, a[k].im * scale);
            c.mul(w[k])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_matches_the_direct_transform() {
        for n in [1, 2, 3, 8, 50, 64, 100, 783] {
            let x: Vec<C64> = (0..n)
                .map(|i| C64::new((i as f64 * 0.37).sin(), (i as f64 * 1.3).cos()))
                .collect();
            for inv in [false, true] {
                let got = transform(&x, inv);
                let want = direct(&x, inv);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g.re - w.re).abs() < 1e-9 * n as f64
                            && (g.im - w.im).abs() < 1e-9 * n as f64,
                        "n={n} inverse={inv}"
                    );
                }
            }
        }
    }
}
