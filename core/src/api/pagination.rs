//! Pages of `/agents` (page and limit) and of `/agent/:id/revenue` (offset and limit).

use serde::{Deserialize, Serialize};

/// Default and largest page size of `/agents` (SPEC.md section 8).
pub const AGENTS_DEFAULT_LIMIT: u64 = 20;
/// Largest page size of `/agents`.
pub const AGENTS_MAX_LIMIT: u64 = 100;
/// Default page size of `/agent/:id/revenue`.
pub const REVENUE_DEFAULT_LIMIT: u64 = 100;
/// Largest page size of `/agent/:id/revenue`.
pub const REVENUE_MAX_LIMIT: u64 = 500;

/// One page of a list addressed by page number (1-indexed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// Items in the whole (filtered) list.
    pub total: u64,
    pub page: u64,
    /// The page size used (after clamping).
    pub limit: u64,
    /// `ceil(total / limit)`, 0 for an empty list.
    pub total_pages: u64,
    pub data: Vec<T>,
}

impl<T> Page<T> {
    /// The same page with every item mapped: lists page plain references first and render
    /// only the items shown.
    pub fn map<U>(self, render: impl FnMut(T) -> U) -> Page<U> {
        let Self { total, page, limit, total_pages, data } = self;
        Page { total, page, limit, total_pages, data: data.into_iter().map(render).collect() }
    }
}

/// One window of a list addressed by offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Window<T> {
    pub total: u64,
    pub offset: u64,
    pub limit: u64,
    pub data: Vec<T>,
}

impl<T> Window<T> {
    /// The same window with every item mapped (see [`Page::map`]).
    pub fn map<U>(self, render: impl FnMut(T) -> U) -> Window<U> {
        let Self { total, offset, limit, data } = self;
        Window { total, offset, limit, data: data.into_iter().map(render).collect() }
    }
}

/// Page `page` (from 1) of `limit` items (at least 1); a page past the end is empty.
pub fn paginate<T: Clone>(items: &[T], page: u64, limit: u64) -> Page<T> {
    let limit = limit.max(1);
    let total = len_u64(items);
    let start = page.max(1).saturating_sub(1).saturating_mul(limit);
    Page { total, page, limit, total_pages: total.div_ceil(limit), data: slice(items, start, limit) }
}

/// `limit` items from `offset`; an offset past the end gives an empty window.
pub fn window<T: Clone>(items: &[T], offset: u64, limit: u64) -> Window<T> {
    Window { total: len_u64(items), offset, limit, data: slice(items, offset, limit) }
}

fn len_u64<T>(items: &[T]) -> u64 {
    u64::try_from(items.len()).unwrap_or(u64::MAX)
}

fn slice<T: Clone>(items: &[T], start: u64, limit: u64) -> Vec<T> {
    let start = usize::try_from(start).unwrap_or(usize::MAX);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    items.iter().skip(start).take(limit).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn past_the_end_is_empty() {
        let items: Vec<u32> = (1..=45).collect();
        let last = paginate(&items, 3, 20);
        assert_eq!((last.total, last.total_pages, last.data), (45, 3, vec![41, 42, 43, 44, 45]));
        let past = paginate(&items, 4, 20);
        assert!(past.data.is_empty());
        assert_eq!(past.total_pages, 3);
        assert_eq!(paginate::<u32>(&[], 1, 20).total_pages, 0);
        assert_eq!(window(&items, 44, 100).data, vec![45]);
        assert!(window(&items, 45, 100).data.is_empty());
    }

    proptest! {
        /// Walking every page gives each item once, in order: no gaps, no duplicates.
        #[test]
        fn pages_cover_the_list_exactly(len in 0usize..300, limit in 1u64..120) {
            let items: Vec<usize> = (0..len).collect();
            let first = paginate(&items, 1, limit);
            let mut seen = Vec::new();
            for page in 1..=first.total_pages + 1 {
                let part = paginate(&items, page, limit);
                prop_assert_eq!(part.total_pages, first.total_pages);
                prop_assert!(part.data.len() as u64 <= limit);
                seen.extend(part.data);
            }
            prop_assert_eq!(seen, items);
        }

        #[test]
        fn windows_cover_the_list_exactly(len in 0usize..300, limit in 1u64..120) {
            let items: Vec<usize> = (0..len).collect();
            let mut seen = Vec::new();
            let mut offset = 0;
            while offset <= len as u64 {
                seen.extend(window(&items, offset, limit).data);
                offset += limit;
            }
            prop_assert_eq!(seen, items);
        }
    }
}
