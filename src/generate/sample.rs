//! Choosing the next token from a row of logits: greedy (the first maximum, as
//! `argmax` in numpy and torch), or a draw from the softmax at a temperature, restricted
//! to the `top_k` most likely tokens and to the smallest set whose probability reaches
//! `top_p` (nucleus sampling), from a seeded ChaCha8 stream so the same seed gives the
//! same tokens on every machine.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How the next token is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// The most likely token (the first, on ties).
    Greedy,
    /// A draw from `softmax(logits / temperature)`, cut to `top_k` tokens and to the
    /// nucleus of probability `top_p` first, with the stream seeded by `seed`.
    Random {
        /// Divides the logits (above 0; 1 keeps the model's distribution).
        temperature: f32,
        /// Keep only the `k` most likely tokens (`None`: all).
        top_k: Option<usize>,
        /// Keep the most likely tokens until their probability reaches `p` (`None`: 1).
        top_p: Option<f32>,
        /// The random stream's seed.
        seed: u64,
    },
}

impl Sampling {
    /// Checks the parameters: a temperature above 0, `top_k` at least 1, `top_p` in
    /// (0, 1].
    pub fn check(&self) -> Result<(), String> {
        match *self {
            Sampling::Greedy => Ok(()),
            Sampling::Random {
                temperature,
                top_k,
                top_p,
                ..
            } => {
                if !(temperature > 0.0 && temperature.is_finite()) {
                    return Err(format!(
                        "temperature {temperature}: expected a number above 0"
                    ));
                }
                if top_k == Some(0) {
                    return Err("top-k 0: expected at least 1".into());
                }
                if let Some(p) = top_p {
                    if !(p > 0.0 && p <= 1.0) {
                        return Err(format!("top-p {p}: expected a number in (0, 1]"));
                    }
                }
                Ok(())
            }
        }
    }

    /// A sampler for one generation.
    pub fn sampler(&self) -> Sampler {
        let seed = match self {
            Sampling::Greedy => 0,
            Sampling::Random { seed, .. } => *seed,
        };
        Sampler {
            how: *self,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }
}

/// A [`Sampling`] with its random stream.
pub struct Sampler {
    how: Sampling,
    rng: ChaCha8Rng,
}

impl Sampler {
    /// The next token from one row of logits.
    pub fn next(&mut self, logits: &[f32]) -> i64 {
        match self.how {
            Sampling::Greedy => argmax(logits) as i64,
            Sampling::Random {
                temperature,
                top_k,
                top_p,
                ..
            } => {
                let u: f64 = self.rng.random();
                draw(logits, temperature, top_k, top_p, u) as i64
            }
        }
    }
}

/// The index of the first maximum (NaN never wins).
pub fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] || row[best].is_nan() && !x.is_nan() {
            best = i;
        }
    }
    best
}

/// The token `u` (uniform in [0, 1)) picks from the cut softmax distribution.
fn draw(row: &[f32], temperature: f32, top_k: Option<usize>, top_p: Option<f32>, u: f64) -> usize {
    let mut order: Vec<usize> = (0..row.len()).filter(|&i| !row[i].is_nan()).collect();
    if order.is_empty() {
        return 0;
    }
    // Most likely first; equal logits keep index order (a stable sort).
    order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
    if let Some(k) = top_k {
        order.truncate(k.max(1));
    }
    let top = f64::from(row[order[0]]);
    let t = f64::from(temperature);
    let mut probs: Vec<f64> = order
        .iter()
        .map(|&i| ((f64::from(row[i]) - top) / t).exp())
        .collect();
    let sum: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= sum);
    if let Some(p) = top_p {
        let mut acc = 0.0;
        let keep = probs
            .iter()
            .position(|&q| {
                acc += q;
                acc >= f64::from(p)
            })
            .map_or(probs.len(), |i| i + 1);
        order.truncate(keep);
        probs.truncate(keep);
        let sum: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|q| *q /= sum);
    }
    let mut acc = 0.0;
    for (&i, &p) in order.iter().zip(&probs) {
        acc += p;
        if u < acc {
            return i;
        }
    }
    order[order.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_maximum() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, 0.25]), 1);
    }

    #[test]
    fn top_k_one_is_greedy_and_seeds_repeat() {
        let row = [0.1, 2.0, 1.9, -3.0];
        let mut s = Sampling::Random {
            temperature: 1.0,
            top_k: Some(1),
            top_p: None,
            seed: 7,
        }
        .sampler();
        assert!((0..20).all(|_| s.next(&row) == 1));
        let how = Sampling::Random {
            temperature: 0.8,
            top_k: None,
            top_p: Some(0.9),
            seed: 3,
        };
        let (mut a, mut b) = (how.sampler(), how.sampler());
        let xs: Vec<i64> = (0..50).map(|_| a.next(&row)).collect();
        let ys: Vec<i64> = (0..50).map(|_| b.next(&row)).collect();
        assert_eq!(xs, ys);
        // Tokens 1 and 2 hold over 90% of the mass: the nucleus never reaches 0 or 3.
        assert!(xs.iter().all(|&t| t == 1 || t == 2), "{xs:?}");
        assert!(xs.contains(&1) && xs.contains(&2), "{xs:?}");
    }

    #[test]
    fn the_draw_follows_the_distribution() {
        // Logits ln(1), ln(3): probabilities 1/4, 3/4.
        let row = [0.0, 3f32.ln()];
        assert_eq!(draw(&row, 1.0, None, None, 0.2), 1);
        assert_eq!(draw(&row, 1.0, None, None, 0.74), 1);
        assert_eq!(draw(&row, 1.0, None, None, 0.76), 0);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let bad = |t, k, p| {
            Sampling::Random {
                temperature: t,
                top_k: k,
                top_p: p,
                seed: 0,
            }
            .check()
        };
        assert!(bad(0.0, None, None).is_err());
        assert!(bad(1.0, Some(0), None).is_err());
        assert!(bad(1.0, None, Some(1.5)).is_err());
        assert!(bad(0.7, Some(40), Some(0.95)).is_ok());
    }
}
