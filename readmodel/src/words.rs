//! Words for the search indexes: lowercase runs of letters and digits. A query matches
//! a document when every query word is one of the document's words (whole words,
//! case-insensitive), which is what the posting-list tables can answer exactly.

use std::collections::BTreeSet;

/// Words longer than this are not indexed (and never match): they are not words.
pub const MAX_WORD_CHARS: usize = 64;

/// The distinct words of a text, lowercased.
pub fn words(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() || word.chars().count() > MAX_WORD_CHARS {
            continue;
        }
        found.insert(word.to_lowercase());
    }
    found
}

/// The words of a query, in a stable order, longest first (the longest word is usually
/// the rarest, so it drives the posting-list intersection). Words too long to be
/// indexed are kept: no document has them, so the query matches nothing (dropping them
/// would widen the query instead).
pub fn query_words(query: &str) -> Vec<String> {
    let mut found: Vec<String> =
        query.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).map(str::to_lowercase).collect::<BTreeSet<_>>().into_iter().collect();
    found.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then_with(|| a.cmp(b)));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lowercases_and_dedupes() {
        let found: Vec<String> = words("Budget review: Budget, Q3-planning!").into_iter().collect();
        assert_eq!(found, vec!["budget", "planning", "q3", "review"]);
    }

    #[test]
    fn query_words_put_the_longest_first() {
        assert_eq!(query_words("q3 Planning budget"), vec!["planning", "budget", "q3"]);
        assert!(query_words("  ,; ").is_empty());
    }

    #[test]
    fn an_unindexable_query_word_is_kept_so_it_matches_nothing() {
        let long = "x".repeat(MAX_WORD_CHARS + 1);
        assert!(words(&long).is_empty());
        assert_eq!(query_words(&format!("budget {long}")), vec![long, "budget".to_string()]);
    }
}
