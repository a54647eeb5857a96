//! One suite for every ledger backend: the same tests of the `Store` interface against
//! SQLite and against a real PostgreSQL server (started by the tests, see testkit::pg),
//! guarded transitions and the races included.

mod backend;
mod channels;
mod history;
mod inquiries;
mod parallel;
mod pg_lost_answers;
mod pg_migrations;
mod pg_session;
mod races;
mod recovery;
mod rules;
mod settle_requests;
mod shipped;
mod transitions;

/// Instantiates each test once per backend: `sqlite::NAME`, `postgres::NAME` and
/// `postgres_serializable::NAME` (every transaction SERIALIZABLE). A backend
/// that is not available here (PostgreSQL not installed, outside CI) skips with one line,
/// and the process ends with one saying how many tests did not run.
macro_rules! for_each_backend {
    ($($module:ident :: $test:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $test() { crate::$module::$test(&crate::backend::Backend::sqlite()); } )*
        }
        mod postgres {
            $( #[test] fn $test() {
                match crate::backend::Backend::postgres() {
                    Some(b) => crate::$module::$test(&b),
                    None => testkit::pg::did_not_run(),
                }
            } )*
        }
        mod postgres_serializable {
            $( #[test] fn $test() {
                match crate::backend::Backend::postgres_serializable() {
                    Some(b) => crate::$module::$test(&b),
                    None => testkit::pg::did_not_run(),
                }
            } )*
        }
    };
}

for_each_backend!(
    transitions::a_claim_is_won_once_and_every_transition_is_guarded,
    channels::the_claim_names_its_channel_and_only_that_channel_reclaims,
    channels::an_anonymous_claim_has_no_channel_and_a_named_reclaim_takes_it,
    channels::every_other_change_keeps_the_channel_and_history_records_it,
    transitions::a_late_result_never_lands_on_a_later_claim,
    transitions::reprocess_reclaims_only_failed_e902_below_the_cap,
    transitions::selections_follow_the_contract,
    transitions::purge_deletes_in_bounded_chunks_and_only_old_done_rows,
    transitions::the_newest_booking_is_the_canary,
    transitions::every_connection_commits_durably,
    transitions::rows_made_by_hand_with_only_the_required_columns_are_read,
    history::every_change_of_a_row_leaves_exactly_one_history_row,
    history::the_history_names_who_changed_a_row_and_why,
    history::history_rows_are_never_updated,
    history::a_purged_row_keeps_its_history_and_history_has_its_own_retention,
    history::evidence_is_a_history_row_that_changes_nothing,
    transitions::the_oldest_age_and_the_health_round_trip,
    races::fifty_threads_claiming_one_guid_one_wins,
    races::fifty_threads_reclaiming_one_failed_guid_one_wins,
    races::two_reprocess_runs_at_once_send_each_row_once,
    races::resolve_racing_the_relay_never_books_twice,
    inquiries::failed_inquiries_count_up_and_back_off_doubling_to_the_cap,
    inquiries::resolve_selects_only_rows_whose_inquiry_is_due_and_not_given_up,
    inquiries::needs_operator_lists_only_guids_still_in_doubt_and_prune_forgets_the_rest,
    inquiries::a_ledger_from_before_the_side_table_reads_no_records_and_gets_it,
    inquiries::failures_recorded_at_once_are_each_counted,
    parallel::parallel_resolve_settles_every_row_once,
    parallel::parallel_reprocess_sends_every_row_once,
    parallel::two_parallel_reprocess_runs_at_once_send_each_row_once,
    parallel::parallel_reprocess_claims_nothing_while_the_core_is_unreachable,
    recovery::the_recovery_mark_is_begun_kept_at_its_earliest_and_ended,
    recovery::a_reported_booking_is_written_only_where_the_guid_has_no_row,
    rules::the_sql_selects_what_the_rules_say,
    settle_requests::the_maker_cannot_approve_and_another_person_carries_it_out,
    settle_requests::a_changed_row_an_expired_or_rejected_request_is_left_alone,
    settle_requests::the_approval_holds_a_row_younger_than_its_age_guard,
    settle_requests::a_statement_by_hand_cannot_approve_its_makers_request,
);
