//! Pseudo-relevance feedback for the vector search (Rocchio, 1971): the query's vector moved
//! towards the vectors of the best hits of a first search, for a second search.
//!
//! It holds for any text because it uses no words: the best first hits are, more often than not,
//! about what was asked, and the turns that share their topic but none of the query's phrasing sit
//! near them in the embedding space. What the second search finds is still scored against the
//! query as asked (its similarity threshold), so feedback changes the order, never what counts as
//! relevant. Measured on LoCoMo in docs/benchmarks.md, tuned on half and checked on the other.

/// `query` (normalised) plus `weight` times the mean of the normalised `best` vectors,
/// normalised; `None` without any `best` vector (nothing to learn from).
pub(super) fn expanded<'a>(
    query: &[f32],
    best: impl Iterator<Item = &'a [f32]>,
    weight: f64,
) -> Option<Vec<f32>> {
    let best: Vec<&[f32]> = best.filter(|vector| vector.len() == query.len()).collect();
    if best.is_empty() || weight <= 0.0 {
        return None;
    }
    let mut sum = unit(query);
    let share = weight as f32 / best.len() as f32;
    for vector in best {
        for (total, x) in sum.iter_mut().zip(unit(vector)) {
            *total += share * x;
        }
    }
    Some(unit(&sum))
}

fn unit(vector: &[f32]) -> Vec<f32> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter().map(|x| x / norm).collect()
    } else {
        vector.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    #[test]
    fn the_query_moves_towards_the_best_hits_and_stays_a_unit_vector() {
        let query = [2.0, 0.0, 0.0];
        let best: [&[f32]; 2] = [&[0.0, 3.0, 0.0], &[0.0, 1.0, 1.0]];
        let moved = expanded(&query, best.into_iter(), 1.0).unwrap_or_default();
        let length: f32 = moved.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((length - 1.0).abs() < 1e-5, "{moved:?}");
        for hit in best {
            assert!(
                cosine(&moved, hit) > cosine(&query, hit),
                "{moved:?} {hit:?}"
            );
        }
        // Each best hit counts by its direction, not its length.
        let doubled: [&[f32]; 2] = [&[0.0, 30.0, 0.0], &[0.0, 1.0, 1.0]];
        assert_eq!(expanded(&query, doubled.into_iter(), 1.0), Some(moved));
    }

    #[test]
    fn without_best_hits_or_weight_there_is_no_second_search() {
        assert_eq!(expanded(&[1.0, 0.0], std::iter::empty(), 1.0), None);
        let other_model: [&[f32]; 1] = [&[1.0, 0.0, 0.0]];
        assert_eq!(expanded(&[1.0, 0.0], other_model.into_iter(), 1.0), None);
        let best: [&[f32]; 1] = [&[0.0, 1.0]];
        assert_eq!(expanded(&[1.0, 0.0], best.into_iter(), 0.0), None);
    }
}
