//! Page numbers and sizes: the one bound on every `page` and `pageSize` parameter, and the
//! row offset a page means, computed without overflow (`?page=18446744073709551615` once
//! wrapped `(page-1)*size`).

/// The highest page a listing serves: past it a request is refused (400). A million pages
/// of the smallest size is a million rows deep; deeper reads take a cursor (`after`).
pub const MAX_PAGE: u64 = 1_000_000;

/// The most rows one page of any listing holds (jobs, a library's health, the audit log);
/// a larger `pageSize` is served as this.
pub const MAX_PAGE_SIZE: u64 = 500;

/// The offset of the first row of `page` (from 1) at `page_size` rows a page; `None` when
/// the page is 0 or past `MAX_PAGE`, or the offset would not fit a signed 64-bit SQL value.
pub fn offset(page: u64, page_size: u64) -> Option<u64> {
    if page == 0 || page > MAX_PAGE {
        return None;
    }
    (page - 1).checked_mul(page_size).filter(|offset| i64::try_from(*offset).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_computed_without_overflow_and_bounded() {
        assert_eq!(offset(1, 50), Some(0));
        assert_eq!(offset(3, 50), Some(100));
        assert_eq!(offset(MAX_PAGE, 500), Some((MAX_PAGE - 1) * 500));
        assert_eq!(offset(0, 50), None);
        assert_eq!(offset(MAX_PAGE + 1, 1), None);
        assert_eq!(offset(u64::MAX, 500), None);
        assert_eq!(offset(2, u64::MAX), None);
        assert_eq!(offset(2, i64::MAX as u64 + 1), None);
    }
}
