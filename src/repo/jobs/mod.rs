//! Jobs in the database, in four files: `read` (one job, jobs by status, the queue's order,
//! the counts, what the domain's rules read of a row), `write` (every change of a job's row, compare-and-set and lease-checked),
//! `list` (the job list's filters, order and pages) and `scan` (registering what scans find,
//! requeueing changed files, recording the probe's facts). Callers name everything through
//! this module.

mod list;
mod read;
mod scan;
mod write;

pub use self::list::{
    list, page_selects, walks_sort_index, Cursor, JobQuery, JobSort, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE,
};
pub use self::read::{
    count_by_status, expired_leases, find_by_path, get, in_statuses, live_under, of_library_in_statuses, queued_next,
    snapshot, source_path,
};
pub use self::scan::{
    begin_probes, count_probing, interrupt_probes, known_files, never_probed, record_probes, register_batch,
    requeue_changed, FoundFile, KnownFile, Probed,
};
pub use self::write::{
    change_status, change_status_as, delete_many, insert, record_event, record_event_leased, set_priority, update_live,
    update_live_leased, Assignment, JobChange, NewJob, StatusChange,
};
