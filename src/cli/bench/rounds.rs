//! Micro-benchmarks run side by side: each function in turn, round after round, the rounds
//! going twice through 16 depths of the stack, and a ratio read from the rounds' own ratios.
//!
//! Why the stack moves: with one fixed stack position per process, Ed25519 verification ran
//! about a fifth slower for one side or the other in one process of four or five, every round
//! alike, and not at all with address-space randomisation off (docs/performance.md, round 24).
//! Where a function's stack frames fall relative to the data it reads decided its speed, not the
//! code measured. Sweeping the position across a page gives every side the same positions.

use super::pgbench::median;
use super::stats::Run;
use std::hint::black_box;
use std::time::Instant;

/// Stack positions the rounds cycle through, [`STACK_STEP`] bytes apart: together they span a
/// page (4 KiB), the period at which addresses alias in the cache.
const STACK_POSITIONS: usize = 16;
const STACK_STEP: usize = 256;
/// Rounds per comparison: each stack position twice, so that every position weighs the same in
/// the median (21 rounds weighed five positions twice and the other eleven once).
const ROUNDS: usize = 2 * STACK_POSITIONS;

/// Runs `a` and `b` in alternating rounds (so drift in the machine hits both alike); each
/// round's time per operation is one latency sample, in round order.
pub(super) fn alternate(
    iters: usize,
    mut a: impl FnMut() -> bool,
    mut b: impl FnMut() -> bool,
) -> (Run, Run) {
    let [ra, rb] = alternate_all(iters, [&mut a, &mut b]);
    (ra, rb)
}

/// [`alternate`] for any number of functions: one run each, in order.
pub(super) fn alternate_all<const N: usize>(
    iters: usize,
    mut fs: [&mut dyn FnMut() -> bool; N],
) -> [Run; N] {
    let mut runs: [Run; N] = std::array::from_fn(|_| Run::default());
    for round in 0..ROUNDS {
        for (f, run) in fs.iter_mut().zip(&mut runs) {
            let t = Instant::now();
            at_depth(depth_of(round), &mut || {
                for _ in 0..iters {
                    assert!(black_box(f()), "a benchmarked verification failed");
                }
            });
            let took = t.elapsed();
            run.count += iters;
            run.elapsed += took;
            run.latencies.push(took / iters as u32);
        }
    }
    runs
}

/// The median over the rounds of `ours`' time over `base`'s in the same round (the same stack
/// position, moments apart): not the ratio of the two medians, which would pair rounds taken
/// at different positions and moments.
pub(super) fn median_ratio(ours: &Run, base: &Run) -> f64 {
    let ratios: Vec<f64> = ours
        .latencies
        .iter()
        .zip(&base.latencies)
        .filter(|(_, b)| !b.is_zero())
        .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
        .collect();
    median(&ratios)
}

/// The stack position of a round: the rounds go through the positions in order, and again.
fn depth_of(round: usize) -> usize {
    round % STACK_POSITIONS
}

/// Calls `f` `depth` × [`STACK_STEP`] bytes deeper in the stack than at depth 0.
#[inline(never)]
fn at_depth(depth: usize, f: &mut dyn FnMut()) {
    if depth == 0 {
        return f();
    }
    // black_box keeps the padding in this frame: without it the compiler may drop it.
    let pad = black_box([0u8; STACK_STEP]);
    at_depth(depth - 1, f);
    black_box(&pad);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run_of(micros: &[u64]) -> Run {
        Run {
            count: micros.len(),
            elapsed: Duration::ZERO,
            latencies: micros.iter().map(|&u| Duration::from_micros(u)).collect(),
        }
    }

    #[test]
    fn the_ratio_pairs_each_round_with_its_own() {
        // The host slows down halfway: both sides double, the ratio stays 1.25.
        let ours = run_of(&[50, 50, 100, 100, 100]);
        let base = run_of(&[40, 40, 80, 80, 80]);
        assert!((median_ratio(&ours, &base) - 1.25).abs() < 1e-9);
        // The host slows down between the two sides of the third round: the medians fall on
        // either side of the change and their ratio reads 0.5; round by round the sides are equal.
        let ours = run_of(&[10, 10, 10, 20, 20]);
        let base = run_of(&[10, 10, 20, 20, 20]);
        assert_eq!(ours.p50_ms() / base.p50_ms(), 0.5);
        assert_eq!(median_ratio(&ours, &base), 1.0);
    }

    #[test]
    fn each_round_runs_at_another_stack_position_and_they_span_a_page() {
        let mut at = Vec::new();
        for depth in 0..STACK_POSITIONS {
            at_depth(depth, &mut || {
                let local = 0u8;
                at.push(std::ptr::from_ref(black_box(&local)) as usize);
            });
        }
        for pair in at.windows(2) {
            let step = pair[0].abs_diff(pair[1]);
            assert!(step >= STACK_STEP, "one depth deeper moved {step} bytes");
        }
        let span = at[0].abs_diff(at[STACK_POSITIONS - 1]);
        assert!(span >= 4096 - STACK_STEP, "the positions span {span} bytes");
    }

    #[test]
    fn every_stack_position_gets_as_many_rounds() {
        let mut rounds_at = [0usize; STACK_POSITIONS];
        for round in 0..ROUNDS {
            rounds_at[depth_of(round)] += 1;
        }
        assert!(
            rounds_at.iter().all(|&n| n == rounds_at[0] && n > 0),
            "rounds per stack position: {rounds_at:?}"
        );
    }

    #[test]
    fn every_function_gets_every_round() {
        let (mut a, mut b) = (0, 0);
        let (ra, rb) = alternate(
            3,
            || {
                a += 1;
                true
            },
            || {
                b += 1;
                true
            },
        );
        assert_eq!((a, b), (3 * ROUNDS, 3 * ROUNDS));
        assert_eq!((ra.latencies.len(), rb.count), (ROUNDS, 3 * ROUNDS));
    }
}
