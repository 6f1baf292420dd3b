//! The fair lock's pace: how often a waiter reads, by its place in the queue.

use super::*;

const POLL: Duration = Duration::from_millis(20);
const RT: Duration = Duration::from_micros(200);

#[test]
fn next_in_line_reads_back_to_back_then_backs_off_to_the_poll() {
    let t0 = Instant::now();
    let mut pace = Pace::new(POLL);
    pace.observed(t0, RT, 1, None);
    // Just arrived at place 1: read again at once.
    assert_eq!(pace.delay(t0), Duration::ZERO);
    assert_eq!(pace.delay(t0 + Duration::from_millis(2)), Duration::ZERO);
    // Waited 3 ms on the holder: the next read starts 1.5 ms after the last one did.
    assert_eq!(
        pace.delay(t0 + Duration::from_millis(3)),
        Duration::from_micros(1_500) - RT
    );
    // Waited 10 ms: 5 ms apart; never slower than the poll.
    assert_eq!(
        pace.delay(t0 + Duration::from_millis(10)),
        Duration::from_millis(5) - RT
    );
    assert_eq!(pace.delay(t0 + Duration::from_secs(5)), POLL - RT);
    assert_eq!(pace.read_limit(), 3);
    // A slow store (10 ms round trips): one read in flight at a time early on, no sleep;
    // a long hold still costs one read per poll.
    let mut slow = Pace::new(POLL);
    slow.observed(t0, Duration::from_millis(10), 1, None);
    assert_eq!(slow.delay(t0 + Duration::from_millis(5)), Duration::ZERO);
    assert_eq!(
        slow.delay(t0 + Duration::from_secs(5)),
        POLL - Duration::from_millis(10)
    );
}

#[test]
fn waiters_further_back_poll_slower_and_beyond_the_window_at_the_poll() {
    let t0 = Instant::now();
    let at = |place| {
        let mut pace = Pace::new(POLL);
        pace.observed(t0, RT, place, None);
        pace.delay(t0)
    };
    // The next two in line read back to back; then slower and slower.
    assert_eq!((at(1), at(2)), (Duration::ZERO, Duration::ZERO));
    assert!(Duration::ZERO < at(3) && at(3) < at(4) && at(4) < at(8));
    assert!(at(WINDOW - 1) <= POLL);
    // Beyond the window, with no hand-over time learnt yet: reads start a poll apart.
    assert_eq!(at(WINDOW), POLL - RT);
    assert_eq!(at(WINDOW + 5), POLL - RT);
    let mut pace = Pace::new(POLL);
    assert_eq!(pace.read_limit(), WINDOW + 1);
    pace.observed(t0, RT, WINDOW + 1, None);
    assert_eq!(pace.read_limit(), WINDOW + 1);
}

#[test]
fn the_hand_over_time_is_learnt_from_the_place_going_down() {
    let t0 = Instant::now();
    let mut pace = Pace::new(POLL);
    pace.observed(t0, RT, 9, None);
    // Four places in 2 ms: 0.5 ms per hand-over, so from place 5 wait (5-1) × 0.5 / 2.
    pace.observed(t0 + Duration::from_millis(2), RT, 5, None);
    assert_eq!(
        pace.delay(t0 + Duration::from_millis(2)),
        Duration::from_millis(1) - RT
    );
    // Standing still for 6 ms means a hand-over takes at least that long.
    assert_eq!(
        pace.delay(t0 + Duration::from_millis(8)),
        Duration::from_millis(12) - RT
    );
    assert_eq!(pace.read_limit(), 7);
}

fn cell(micros: i64, id: &str) -> String {
    format!("{micros:020}{:020}{id}", 0)
}

#[test]
fn the_place_beyond_the_cells_read_is_estimated_from_their_spacing() {
    // 17 cells read, 100 µs apart; mine arrived 1 ms after the last: 9 places beyond it.
    let read: Vec<String> = (0..17).map(|i| cell(1_000 + i * 100, "a")).collect();
    assert_eq!(
        estimated_place(&read, &cell(1_000 + 1_600 + 1_000, "z")),
        26
    );
    // Right behind the last cell read: the place after it.
    assert_eq!(estimated_place(&read, &cell(1_000 + 1_650, "z")), 17);
    // Times that do not spread, or mine not later: no more than the cells read.
    let same: Vec<String> = (0..17).map(|_| cell(5_000, "a")).collect();
    assert_eq!(estimated_place(&same, &cell(9_000, "z")), 17);
    assert_eq!(estimated_place(&read, &cell(500, "z")), 17);
    assert_eq!(estimated_place(&read, "not a queue cell"), 17);
    assert_eq!(head_moved(&read, &read[5]), Some(5));
    assert_eq!(head_moved(&read, &cell(99_999, "b")), None);
}

#[test]
fn waiters_far_back_read_less_often_the_further_back_they_are() {
    let t0 = Instant::now();
    let mut pace = Pace::new(POLL);
    // First read at place 76 (estimated): no hand-over time yet, so the poll.
    pace.observed(t0, RT, 76, None);
    assert_eq!(pace.delay(t0), POLL - RT);
    // 20 ms later the head moved 10 places (2 ms per hand-over) and we are at 66: a
    // quarter of (66 - 16) × 2 ms.
    let t1 = t0 + Duration::from_millis(20);
    pace.observed(t1, RT, 66, Some(10));
    assert_eq!(pace.delay(t1), Duration::from_millis(25) - RT);
    assert_eq!(pace.read_limit(), WINDOW + 1);
    // The learnt time is the far waiter's own: it does not pace places in the window.
    assert_eq!(pace.hand_over, None);
    // The head stood still for 3 ms, then 13 ms: a hand-over takes at least that long;
    // at most the cap.
    let t2 = t1 + Duration::from_millis(3);
    pace.observed(t2, RT, 66, Some(0));
    assert_eq!(pace.delay(t2), Duration::from_micros(37_500) - RT);
    assert_eq!(
        pace.delay(t2 + Duration::from_millis(10)),
        POLL * FAR_POLLS - RT
    );
    // Just beyond the window: never sooner than the poll.
    let t3 = t2 + Duration::from_millis(40);
    pace.observed(t3, RT, WINDOW + 2, Some(22));
    assert_eq!(pace.delay(t3), POLL - RT);
    // Inside the window the waiter's own place paces it again.
    pace.observed(t3 + POLL, RT, 4, Some(12));
    assert!(pace.delay(t3 + POLL) < POLL);
}

#[test]
fn collisions_back_off_exponentially_and_reset() {
    let t0 = Instant::now();
    let mut pace = Pace::new(POLL);
    pace.observed(t0, RT, 0, None);
    assert_eq!(pace.collided(), RT);
    assert_eq!(pace.collided(), RT * 2);
    assert_eq!(pace.collided(), RT * 4);
    for _ in 0..20 {
        assert!(pace.collided() <= POLL * 2);
    }
    pace.no_collision();
    assert_eq!(pace.collided(), RT);
}

#[test]
fn an_instant_store_is_not_polled_in_a_busy_loop() {
    let t0 = Instant::now();
    let mut pace = Pace::new(POLL);
    pace.observed(t0, Duration::ZERO, 1, None);
    assert_eq!(pace.delay(t0), POLL / 200);
    assert_eq!(pace.delay(t0 + Duration::from_secs(5)), POLL);
    assert_eq!(pace.collided(), POLL / 200);
}
