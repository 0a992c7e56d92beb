//! The words of an identifier (`apiKey`, `SITELEAF_TOKEN`, `x-api-key`), as the service detector
//! (`service.rs`) and the generic `key = value` detector (`generic.rs`) both split them. Below
//! both, so neither imports the other for it.

use std::ops::Range;

/// Call `f` with each word of `text`: runs of letters and digits, split where lower case turns
/// upper (`apiKey`) and before the last capital of a capital run followed by lower case
/// (`APIKey` → `API`, `Key`); digits stay with their letters (`auth0`, `s3`).
pub fn for_words(text: &[u8], mut f: impl FnMut(&[u8])) {
    for_word_spans(text, |r| f(&text[r]));
}

/// The same words as ranges of `text`.
pub fn for_word_spans(text: &[u8], mut f: impl FnMut(Range<usize>)) {
    let mut i = 0;
    while i < text.len() {
        if !text[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < text.len() && text[i].is_ascii_alphanumeric() {
            let (prev, b) = (text[i - 1], text[i]);
            let next_lower = text.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            if (prev.is_ascii_lowercase() && b.is_ascii_uppercase())
                || ((prev.is_ascii_uppercase() || prev.is_ascii_digit()) && b.is_ascii_uppercase() && next_lower)
            {
                break;
            }
            i += 1;
        }
        f(start..i);
    }
}
