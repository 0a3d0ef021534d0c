//! The reconciler in the sync write path, on in-memory SQLite and (with
//! `AGG_TEST_DATABASE_URL`) PostgreSQL: what the conformance suite's fake bridges cannot show,
//! the provider's pending link and the tip rule, and the events of the matches made.

#[cfg(feature = "postgres")]
use super::provider_tests::on_postgres;
#[cfg(feature = "sqlite")]
use super::provider_tests::sqlite_store;
use super::provider_tests::{
    Shared, SyncFixture, account, authorize, sync_events_of, transaction, user, write_sync,
};
use super::*;
use crate::events::EventType;

fn row(
    id: &str,
    amount: &str,
    date: &str,
    text: &str,
    status: TransactionStatus,
) -> NewTransaction {
    NewTransaction {
        description: Some(text.to_owned()),
        transaction_date: date.parse().expect("date"),
        status,
        ..transaction(id, amount)
    }
}

fn sync_of(rows: Vec<NewTransaction>) -> SyncFixture {
    SyncFixture {
        accounts: vec![account("A", "100.00"), account("B", "0")],
        per_account: vec![BatchAccount {
            account: None,
            balance_reported: false,
            absent_holdings: AbsentHoldings::Deactivated,
            provider_account_id: "A".to_owned(),
            transactions: Some(rows),
            pending_window: Some((
                "2024-02-01".parse().expect("date"),
                "2024-03-31".parse().expect("date"),
            )),
            holdings: None,
            snapshots: Vec::new(),
        }],
        mark_synced: true,
        account_limit: None,
        feed: None,
    }
}

async fn booked_rows_take_over_by_link_and_by_the_tip_rule(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, Some("Main"), 1, t0, t0).await;
    let pending = TransactionStatus::Pending;
    let settled = TransactionStatus::Settled;
    let first = sync_of(vec![
        row(
            "p-dinner",
            "-40.00",
            "2024-03-01",
            "Trattoria Roma",
            pending,
        ),
        row("p-cafe", "-10.00", "2024-03-01", "Cafe", pending),
        row("p-fuel", "-50.00", "2024-03-01", "Fuel Stop", pending),
    ]);
    let raise = sync_events_of(&store, connection.id, t0).await;
    let counts = write_sync(&store, connection.id, &first, t0, &raise, &mut Vec::new())
        .await
        .expect("first sync");
    let account_id = counts.accounts.ids[0];
    let page = TransactionQuery::Recent {
        transaction_type: None,
        limit: 50,
        offset: 0,
    };
    let before = store
        .transactions_for_account(user_id, account_id, &page)
        .await
        .expect("rows");
    let id_of = |rows: &[TransactionRecord], amount: &str| {
        rows.iter()
            .find(|row| row.amount == amount.parse::<rust_decimal::Decimal>().expect("amount"))
            .map(|row| row.id)
    };
    // The dinner books 15 % higher (a tip), the cafe under a linked id with another text, the
    // fuel 30 % higher: too far from its pending amount, so that one is removed.
    let mut linked = row("b-cafe", "-10.00", "2024-03-02", "CARD 4411", settled);
    linked.pending_transaction_id = Some("p-cafe".to_owned());
    let second = sync_of(vec![
        row(
            "b-dinner",
            "-46.00",
            "2024-03-03",
            "TRATTORIA ROMA NYC",
            settled,
        ),
        linked,
        row("b-fuel", "-65.00", "2024-03-02", "FUEL STOP", settled),
    ]);
    let mut raised = Vec::new();
    let counts = write_sync(&store, connection.id, &second, t0, &raise, &mut raised)
        .await
        .expect("second sync");
    assert_eq!(counts.transactions_booked, 2);
    assert_eq!(counts.transactions.updated, 2);
    assert_eq!(counts.transactions.created, 1);
    assert_eq!(counts.transactions_removed, 1);
    let after = store
        .transactions_for_account(user_id, account_id, &page)
        .await
        .expect("rows");
    assert_eq!(after.items.len(), 3);
    let dinner = after
        .items
        .iter()
        .find(|row| row.provider_transaction_id == "b-dinner")
        .expect("dinner");
    assert_eq!(Some(dinner.id), id_of(&before.items, "-40.00"));
    assert_eq!(dinner.pending_transaction_id.as_deref(), Some("p-dinner"));
    assert_eq!(dinner.status, settled);
    let cafe = after
        .items
        .iter()
        .find(|row| row.provider_transaction_id == "b-cafe")
        .expect("cafe");
    assert_eq!(Some(cafe.id), id_of(&before.items, "-10.00"));
    assert_eq!(cafe.pending_transaction_id.as_deref(), Some("p-cafe"));
    assert_eq!(cafe.source, TransactionSource::Sync);
    let fuel = after
        .items
        .iter()
        .find(|row| row.provider_transaction_id == "b-fuel")
        .expect("fuel");
    assert_ne!(Some(fuel.id), id_of(&before.items, "-50.00"));
    assert!(fuel.pending_transaction_id.is_none());
    // Take-overs are no matches: only sync.completed was raised.
    assert!(
        raised
            .iter()
            .all(|event| event.event_type == EventType::SyncCompleted)
    );
}

async fn transfers_raise_matched_events_and_decisions_unmatched(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, Some("Main"), 1, t0, t0).await;
    let settled = TransactionStatus::Settled;
    let mut batch = sync_of(vec![row(
        "out",
        "-500.00",
        "2024-03-01",
        "To savings",
        settled,
    )]);
    batch.per_account.push(BatchAccount {
        account: None,
        balance_reported: false,
        absent_holdings: AbsentHoldings::Deactivated,
        provider_account_id: "B".to_owned(),
        transactions: Some(vec![row(
            "in",
            "500.00",
            "2024-03-02",
            "From checking",
            settled,
        )]),
        pending_window: None,
        holdings: None,
        snapshots: Vec::new(),
    });
    let raise = sync_events_of(&store, connection.id, t0).await;
    let mut raised = Vec::new();
    let counts = write_sync(&store, connection.id, &batch, t0, &raise, &mut raised)
        .await
        .expect("sync");
    assert_eq!(counts.transfers, 1);
    assert_eq!(counts.matches.len(), 1);
    let made = &counts.matches[0];
    assert_eq!(made.kind, MatchKind::Transfer);
    assert_eq!(made.status, MatchStatus::Automatic);
    let matched: Vec<&crate::events::Event> = raised
        .iter()
        .filter(|event| event.event_type == EventType::TransactionsMatched)
        .collect();
    assert_eq!(matched.len(), 1);
    assert_eq!(matched[0].data["match_id"], made.id.to_string());
    assert_eq!(matched[0].data["kind"], "transfer");
    let [first, second] = made.transaction_ids[..] else {
        panic!("two legs: {made:?}");
    };
    let leg = |id| {
        let store = store.clone();
        async move {
            store
                .transaction_for_user(user_id, id)
                .await
                .expect("read")
                .expect("leg")
        }
    };
    assert_eq!(leg(first).await.transfer_transaction_id, Some(second));
    assert_eq!(leg(second).await.transfer_transaction_id, Some(first));

    let mut decided = Vec::new();
    let unmatched = |record: &MatchRecord| vec![crate::records::matches::match_event(record, t0)];
    let rejected = store
        .decide_match(
            user_id,
            made.id,
            MatchDecision::Reject,
            t0,
            &unmatched,
            &mut decided,
        )
        .await
        .expect("reject")
        .expect("found");
    assert_eq!(rejected.status, MatchStatus::Rejected);
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].event_type, EventType::TransactionsUnmatched);
    assert_eq!(leg(first).await.transfer_transaction_id, None);
    // Deciding it again changes nothing and raises nothing.
    let again = store
        .decide_match(
            user_id,
            made.id,
            MatchDecision::Reject,
            t0,
            &unmatched,
            &mut decided,
        )
        .await
        .expect("reject again")
        .expect("found");
    assert_eq!(again.status, MatchStatus::Rejected);
    assert_eq!(decided.len(), 1);
    // Another user's decision finds nothing.
    let stranger = user(&store).await;
    let foreign = store
        .decide_match(
            stranger,
            made.id,
            MatchDecision::Accept,
            t0,
            &unmatched,
            &mut decided,
        )
        .await
        .expect("decide");
    assert!(foreign.is_none());
    assert!(
        store
            .transaction_matches(
                stranger,
                &MatchFilter {
                    limit: 10,
                    ..MatchFilter::default()
                }
            )
            .await
            .expect("list")
            .is_empty()
    );
}

/// Spending's rows page on from the position, one bound on the date (the keyset's seek), and
/// never before `from` even when a position before it is given.
async fn spending_rows_page_on_from_the_position(store: Shared) {
    let user_id = user(&store).await;
    let connection = store
        .find_or_create_connection(user_id, "file_import", Some("Paged"), now())
        .await
        .expect("connection");
    let upserted = store
        .upsert_accounts(connection.id, &[account("A", "0")], now())
        .await
        .expect("account");
    let rows: Vec<NewTransaction> = (0..7)
        .map(|index| {
            row(
                &format!("r{index}"),
                "-1.00",
                &format!("2024-03-0{}", 1 + index / 2),
                "Row",
                TransactionStatus::Settled,
            )
        })
        .collect();
    store
        .upsert_transactions(upserted.ids[0], &rows, now())
        .await
        .expect("rows");
    let (from, to) = (
        "2024-03-02".parse().expect("date"),
        "2024-03-04".parse().expect("date"),
    );
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .spending_rows(user_id, from, to, after, 2)
            .await
            .expect("page");
        if page.is_empty() {
            break;
        }
        after = page.last().map(|last| TransactionPosition {
            transaction_date: last.transaction_date,
            id: last.id,
        });
        seen.extend(page.into_iter().map(|row| (row.transaction_date, row.id)));
    }
    // r2..r6: two rows a day from 2 March, one on 4 March; in order, each once.
    assert_eq!(seen.len(), 5, "{seen:?}");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, seen);
    // A position before `from` still starts at `from`.
    let early = TransactionPosition {
        transaction_date: "2024-02-01".parse().expect("date"),
        id: uuid::Uuid::nil(),
    };
    let page = store
        .spending_rows(user_id, from, to, Some(early), 10)
        .await
        .expect("page");
    assert_eq!(page.len(), 5);
    assert!(page.iter().all(|row| row.transaction_date >= from));
}

super::provider_tests::suite!(
    booked_rows_take_over_by_link_and_by_the_tip_rule,
    transfers_raise_matched_events_and_decisions_unmatched,
    spending_rows_page_on_from_the_position,
);
