//! The ambient state: each place put in force and back, the call's
//! exchange, the budget's packing and the layer rule's table.

use core::cell::Cell;
use core::time::Duration;

use super::exchange::{
    around, attempt, count_violation, install, install_first, restore, take_from_budget,
};
use super::*;
use crate::vocab::layer::Layer;

std::thread_local! {
    static NAME: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// A place of the tests' own, put in force the way every scoped value is.
struct Name;

impl Ambient for Name {
    type Value = Option<&'static str>;

    fn swap(value: &mut Option<&'static str>) {
        NAME.with(|c| *value = c.replace(*value));
    }
}

fn current() -> Option<&'static str> {
    NAME.with(Cell::get)
}

/// What a restore hands to its report: nothing when it has none.
fn no_report((): (), layer: Layer, count: u32) {
    panic!("{count} violations reported at {layer}");
}

#[tokio::test]
async fn scopes_nest_and_restore_across_awaits() {
    let inner = async {
        tokio::task::yield_now().await;
        current()
    };
    let outer = async {
        let before = current();
        let nested = Scoped::<Name, _>::new(Some("inner"), inner).await;
        tokio::task::yield_now().await;
        (before, nested, current())
    };
    let got = Scoped::<Name, _>::new(Some("outer"), outer).await;
    assert_eq!(got, (Some("outer"), Some("inner"), Some("outer")));
    assert_eq!(current(), None);
}

#[test]
fn a_default_budget_never_cuts_a_loop_below_its_own_attempts() {
    let default = Budget::new(9, 9);
    assert_eq!((default.left(3), default.left(10)), (0, 1));
    let explicit = Budget::explicit(9, 9);
    assert_eq!((explicit.left(3), explicit.left(10)), (0, 0));
    assert!(explicit.took_one().is_explicit());
    assert_eq!(explicit.took_one().used(), 10);
    assert_eq!(Budget::new(u32::MAX, 0).total(), i32::MAX as u32);
}

#[test]
fn a_poll_writes_its_changes_back_and_restores_the_outer_context() {
    let drawn = IdempotencyKey::from_u128(7);
    let mut outer_key = IdempotencyKey::UNDRAWN;
    let slot = AttemptSlot::new(Layer::Tool, 2, 3, false);
    let outer = install(Some(Budget::new(9, 1)), slot, &mut outer_key);
    assert_eq!(outer.attempt, AttemptSlot::NONE);
    take_from_budget();
    let (seen, first, in_force) = attempt(|| drawn).unwrap();
    assert_eq!(
        (seen.layer(), seen.attempt(), seen.max_attempts()),
        (Layer::Tool, 2, 3)
    );
    assert_eq!((first, in_force), (drawn, Some(Budget::new(9, 2))));
    assert_eq!(attempt(|| unreachable!("drawn once")).unwrap().1, drawn);
    // A nested attempt reads the outer (the request's) key, and holds none.
    let mut inner_key = IdempotencyKey::UNDRAWN;
    let inner_slot = AttemptSlot::new(Layer::Http, 1, 3, false);
    let inner = install(None, inner_slot, &mut inner_key);
    assert_eq!(inner.attempt, seen.with_key());
    let (nested, key, _) = attempt(|| unreachable!("the outer key")).unwrap();
    assert_eq!((nested.layer(), key), (Layer::Http, drawn));
    assert_eq!(
        restore(inner, &mut inner_key, false, &mut false, (), no_report),
        None
    );
    assert_eq!(inner_key, IdempotencyKey::UNDRAWN, "not the nested call's");
    assert_eq!(attempt(|| unreachable!("put back")).unwrap().1, drawn);
    let back = restore(outer, &mut outer_key, true, &mut false, (), no_report);
    assert_eq!((back, outer_key), (Some(Budget::new(9, 2)), drawn));
    assert_eq!(attempt(IdempotencyKey::draw), None);
    assert_eq!(budget(), None);
}

#[test]
fn a_first_poll_reads_what_is_around_it_in_the_access_that_puts_it_in_force() {
    let default = Budget::new(9, 1);
    let mut key = IdempotencyKey::UNDRAWN;
    // Outermost: it owns the default budget, in force during its poll.
    let provider = AttemptSlot::new(Layer::Provider, 1, 3, false);
    let (outer, owned) = install_first(Layer::Provider, provider, default, &mut key).unwrap();
    assert_eq!(
        (outer.attempt, owned, budget()),
        (AttemptSlot::NONE, Some(default), Some(default))
    );
    // Nested at a layer it may nest in: no budget of its own.
    let http = AttemptSlot::new(Layer::Http, 1, 3, false);
    let (inner, none) = install_first(Layer::Http, http, default, &mut key).unwrap();
    assert_eq!(
        (inner.attempt, none, budget()),
        (provider, None, Some(default))
    );
    // Nested where it breaks the layer rule: left to the caller, nothing put in force.
    let provider_again = AttemptSlot::new(Layer::Provider, 1, 3, false);
    assert_eq!(
        install_first(Layer::Provider, provider_again, default, &mut key),
        None
    );
    assert_eq!(
        attempt(|| IdempotencyKey::from_u128(1)).unwrap().0.layer(),
        Layer::Http
    );
    restore(inner, &mut key, false, &mut false, (), no_report);
    assert_eq!(
        restore(outer, &mut key, true, &mut false, (), no_report),
        Some(default)
    );
    assert_eq!(budget(), None);
    // Under a task policy: left to the caller too.
    let mut policy = Some(crate::task::TaskPolicy::new());
    let _scope = Swap::<Policy>::new(&mut policy);
    assert_eq!(
        install_first(Layer::Provider, provider, default, &mut key),
        None
    );
    assert_eq!(budget(), None);
}

#[test]
fn a_failing_call_reads_what_is_around_it_in_one_access_and_takes_from_the_budget_in_force() {
    let none = AroundFailure {
        budget: None,
        not_idempotent: false,
        scoped: false,
    };
    assert_eq!(around_failure(), none);
    // Inside an attempt of an owner that is not idempotent, under a policy.
    let mut key = IdempotencyKey::UNDRAWN;
    let slot = AttemptSlot::new(Layer::Provider, 1, 3, false).saying(Idempotence::Not);
    let outer = install(Some(Budget::new(9, 1)), slot, &mut key);
    let mut policy = Some(crate::task::TaskPolicy::new());
    {
        let _scope = Swap::<Policy>::new(&mut policy);
        let around = around_failure();
        assert_eq!(around.budget, Some(Budget::new(9, 1)));
        assert!(around.not_idempotent && around.scoped);
        assert_eq!(take_from_budget(), Some(Budget::new(9, 2)), "as it is then");
        assert_eq!(around_failure().budget, Some(Budget::new(9, 2)));
    }
    let back = restore(outer, &mut key, true, &mut false, (), no_report);
    assert_eq!(
        back,
        Some(Budget::new(9, 2)),
        "the owner's, as its nested loops left it"
    );
    assert_eq!((around_failure(), take_from_budget()), (none, None));
}

#[test]
fn a_key_drawn_in_a_nested_attempt_is_the_outermost_calls() {
    let drawn = IdempotencyKey::from_u128(9);
    let mut owner_key = IdempotencyKey::UNDRAWN;
    let (mut middle_key, mut inner_key) = (IdempotencyKey::UNDRAWN, IdempotencyKey::UNDRAWN);
    for poll in 0..2 {
        let has_key = owner_key != IdempotencyKey::UNDRAWN;
        let owner_slot = AttemptSlot::new(Layer::Provider, 1, 3, has_key);
        let owner = install(Some(Budget::new(9, 1)), owner_slot, &mut owner_key);
        let middle = install(
            None,
            AttemptSlot::new(Layer::Provider, 2, 3, false),
            &mut middle_key,
        );
        let inner = install(
            None,
            AttemptSlot::new(Layer::Http, 1, 3, false),
            &mut inner_key,
        );
        let draw = || {
            if poll == 0 {
                drawn
            } else {
                unreachable!("drawn once")
            }
        };
        assert_eq!(attempt(draw).unwrap().1, drawn);
        restore(inner, &mut inner_key, false, &mut false, (), no_report);
        assert_eq!(attempt(|| unreachable!("handed out")).unwrap().1, drawn);
        restore(middle, &mut middle_key, false, &mut false, (), no_report);
        assert_eq!(attempt(|| unreachable!("handed out")).unwrap().1, drawn);
        restore(owner, &mut owner_key, true, &mut false, (), no_report);
        assert_eq!(owner_key, drawn, "the owner keeps it between its polls");
        assert_eq!(attempt(IdempotencyKey::draw), None);
    }
    assert_eq!(
        (middle_key, inner_key),
        (IdempotencyKey::UNDRAWN, IdempotencyKey::UNDRAWN)
    );
}

#[test]
fn an_owner_polled_inside_another_call_puts_that_calls_budget_back() {
    let mut key = IdempotencyKey::UNDRAWN;
    let slot = AttemptSlot::new(Layer::Provider, 1, 3, false);
    let outer = install(Some(Budget::new(9, 4)), slot, &mut key);
    // A call that owns a budget (first polled outside any retried call)
    // now polled inside this attempt: its budget in force, then the outer one back.
    let inner = install(Some(Budget::explicit(3, 1)), slot, &mut key);
    take_from_budget();
    assert_eq!(
        restore(inner, &mut key, true, &mut false, (), no_report),
        Some(Budget::explicit(3, 2))
    );
    assert_eq!(
        budget(),
        Some(Budget::new(9, 4)),
        "the outer budget is back"
    );
    assert_eq!(
        restore(outer, &mut key, true, &mut false, (), no_report),
        Some(Budget::new(9, 4))
    );
    assert_eq!(budget(), None);
}

#[test]
fn violations_counted_on_an_attempt_leave_the_rest_of_it_alone() {
    assert_eq!(count_violation(|_| true), None, "no attempt in force");
    let slot = AttemptSlot::new(Layer::Tool, 2, 3, false);
    let mut key = IdempotencyKey::UNDRAWN;
    let outer = install(None, slot, &mut key);
    assert_eq!(count_violation(|_| false), None, "a normal shape");
    assert_eq!(
        count_violation(|layer| layer == Layer::Tool),
        Some(Layer::Tool)
    );
    assert_eq!(count_violation(|_| true), Some(Layer::Tool));
    let counted = CONTEXT.with(|c| c.attempt.get());
    assert_eq!(
        (counted.violations(), counted.layer(), counted.attempt()),
        (2, Layer::Tool, 2)
    );
    assert_eq!((counted.max_attempts(), counted.has_key()), (3, false));
    // Its restore hands them to its report with the attempt's layer, and
    // puts the outer context back.
    std::thread_local! {
        static REPORTED: Cell<Option<(&'static str, Layer, u32)>> = const { Cell::new(None) };
    }
    restore(
        outer,
        &mut key,
        false,
        &mut false,
        "tools::run",
        |caller, layer, count| {
            REPORTED.with(|r| r.set(Some((caller, layer, count))));
        },
    );
    assert_eq!(
        REPORTED.with(Cell::get),
        Some(("tools::run", Layer::Tool, 2))
    );
    assert_eq!(CONTEXT.with(|c| c.attempt.get()), AttemptSlot::NONE);
}

#[test]
fn a_budget_packs_its_total_use_and_kind() {
    let budget = Budget::new(9, 4);
    assert_eq!(
        (budget.total(), budget.used(), budget.is_explicit()),
        (9, 4, false)
    );
    let explicit = Budget::explicit(5, 2).took_one();
    assert_eq!(
        (explicit.total(), explicit.used(), explicit.is_explicit()),
        (5, 3, true)
    );
}

#[test]
fn the_accessors_read_the_frame_in_force() {
    let mut limit = ConnectLimit::new(Some(Duration::from_secs(2)), Layer::Http);
    {
        let _connect = Swap::<Connect>::new(&mut limit);
        assert_eq!(connect_limit(), Some((Duration::from_secs(2), Layer::Http)));
    }
    assert_eq!(connect_limit(), None);
    assert!(limit.unwrap().reached, "back as the boundary left it");

    let slot = AttemptSlot::new(Layer::Http, 1, 3, false);
    let mut key = IdempotencyKey::UNDRAWN;
    let outer = install(Some(Budget::new(9, 3)), slot, &mut key);
    assert_eq!(
        (budget(), around(Layer::Http)),
        (Some(Budget::new(9, 3)), (false, true, true))
    );
    restore(outer, &mut key, true, &mut false, (), no_report);
    assert_eq!(budget(), None);

    let scoped = || CONTEXT.with(|c| c.scoped.get());
    let budget_of = || with_policy(|p| p.map(|p| p.budget));
    let mut policy = Some(crate::task::TaskPolicy::new().with_budget(4));
    {
        let _outer = Swap::<Policy>::new(&mut policy);
        assert!(scoped() && budget_of() == Some(Some(4)));
        let mut hidden = None;
        {
            let _hidden = Swap::<Policy>::new(&mut hidden);
            assert!(
                !scoped() && budget_of().is_none(),
                "hidden: the flag follows"
            );
        }
        assert!(scoped(), "the inner swap put the outer one back");
    }
    assert!(!scoped() && budget_of().is_none());
    assert_eq!(
        policy.and_then(|p| p.budget),
        Some(4),
        "back with its owner"
    );
}

#[test]
fn the_table_of_breaks_is_the_rule_for_all_sixteen_pairs() {
    for outer in Layer::ALL {
        for inner in Layer::ALL {
            let mut key = IdempotencyKey::UNDRAWN;
            let slot = AttemptSlot::new(outer, 1, 3, false);
            let installed = install(Some(Budget::new(9, 1)), slot, &mut key);
            let (_, nested, breaks) = around(inner);
            restore(installed, &mut key, true, &mut false, (), no_report);
            assert!(nested);
            let rule = !inner.may_nest_in(outer);
            assert_eq!(breaks, rule, "{inner} inside {outer}");
        }
    }
    assert!(
        !around(Layer::Http).2,
        "no attempt around: nothing to break"
    );
}

#[test]
fn a_stream_takes_the_innermost_frame_or_waits_for_it() {
    let frame = |ms| StreamFrame {
        start: None,
        read: Some(Duration::from_millis(ms)),
        total: None,
        layer: Layer::Http,
        of: crate::metrics::StreamOf::new("tests::frame"),
        site: None,
    };
    assert_eq!(stream_frame(), FrameInForce::Outside);
    {
        // `#[timeout]` alone, outside any call.
        let mut once = (Some(frame(1)), false);
        let _once = Swap::<OnceFrame>::new(&mut once);
        assert_eq!(stream_frame(), FrameInForce::Frame(frame(1)));
    }
    let mut key = IdempotencyKey::UNDRAWN;
    let slot = AttemptSlot::new(Layer::Provider, 1, 3, false);
    let outer = install(Some(Budget::new(9, 1)), slot, &mut key);
    // A call in its first poll: no frame yet.
    assert_eq!(stream_frame(), FrameInForce::NotYet);
    {
        let mut once = (Some(frame(2)), false);
        let _once = Swap::<OnceFrame>::new(&mut once);
        assert_eq!(stream_frame(), FrameInForce::Frame(frame(2)));
        // The body draws the call's key meanwhile: the key bit stays.
        let drawn = attempt(IdempotencyKey::draw).unwrap().1;
        assert_eq!(attempt(|| unreachable!("kept")).unwrap().1, drawn);
    }
    assert_eq!(stream_frame(), FrameInForce::NotYet, "unmarked again");
    assert!(CONTEXT.with(|c| c.attempt.get().has_key()));
    let mut streams = false;
    restore(outer, &mut key, true, &mut streams, (), no_report);
    assert!(streams, "the call is told a stream asked for its frame");
    {
        // A call past its first poll, with its frame in force.
        let outer = install(None, slot.with_stream(), &mut key);
        let mut call = Some(frame(3));
        let _call = Swap::<Frame>::new(&mut call);
        assert_eq!(stream_frame(), FrameInForce::Frame(frame(3)));
        {
            let inner = install(None, slot, &mut key);
            assert_eq!(stream_frame(), FrameInForce::NotYet, "an inner call's turn");
            let mut streams = false;
            restore(inner, &mut key, false, &mut streams, (), no_report);
            assert!(streams, "the inner call is the one asked");
        }
        let mut streams = false;
        restore(outer, &mut key, false, &mut streams, (), no_report);
        assert!(!streams, "the outer call had its frame in force");
    }
    assert_eq!(stream_frame(), FrameInForce::Outside);
}

#[test]
fn a_timeout_alone_puts_its_frame_in_force_only_once_a_stream_asks() {
    let frame = StreamFrame {
        start: None,
        read: Some(Duration::from_millis(7)),
        total: None,
        layer: Layer::Provider,
        of: crate::metrics::StreamOf::new("tests::alone"),
        site: None,
    };
    // Outside any call: a stream in its body asks it; its body without a
    // stream leaves nothing changed.
    let mut alone = Alone::default();
    {
        let _mark = Swap::<AloneMark>::new(&mut alone);
    }
    assert!(!alone.asked);
    let mut alone = Alone::default();
    {
        let _mark = Swap::<AloneMark>::new(&mut alone);
        assert_eq!(stream_frame(), FrameInForce::NotYet);
    }
    assert!(alone.asked);
    assert_eq!(CONTEXT.with(|c| c.attempt.get()), AttemptSlot::NONE);
    assert_eq!(stream_frame(), FrameInForce::Outside);

    // Inside a call past its first poll, with its own frame in force: the
    // stream asks the `#[timeout]` alone, not the call, and the call's
    // frame and bits are in force again after.
    let mut key = IdempotencyKey::UNDRAWN;
    let slot = AttemptSlot::new(Layer::Provider, 1, 3, false).with_stream();
    let outer = install(Some(Budget::new(9, 1)), slot, &mut key);
    let mut call = Some(frame);
    let _call = Swap::<Frame>::new(&mut call);
    let mut alone = Alone::default();
    {
        let _mark = Swap::<AloneMark>::new(&mut alone);
        assert_eq!(stream_frame(), FrameInForce::NotYet);
        // The body draws the call's key meanwhile: the key bit stays.
        attempt(IdempotencyKey::draw).unwrap();
    }
    assert!(alone.asked);
    assert_eq!(stream_frame(), FrameInForce::Frame(frame));
    assert!(CONTEXT.with(|c| c.attempt.get().has_key()));
    let mut streams = false;
    restore(outer, &mut key, true, &mut streams, (), no_report);
    assert!(!streams, "the request was the timeout's, not the call's");
}

#[test]
fn a_connect_scope_puts_the_outer_limit_back() {
    let limit = |ms| ConnectLimit::new(Some(Duration::from_millis(ms)), Layer::Http);
    let mut outer = limit(500);
    let _outer = Swap::<Connect>::new(&mut outer);
    let mut inner = limit(200);
    {
        let _inner = Swap::<Connect>::new(&mut inner);
        assert_eq!(
            connect_limit(),
            Some((Duration::from_millis(200), Layer::Http))
        );
    }
    assert!(inner.unwrap().reached);
    // The outer limit again, as it was: not reached by the inner read.
    let reached = || CONTEXT.with(|c| c.connect.get().map(|l| l.reached));
    assert_eq!(reached(), Some(false));
    assert_eq!(
        connect_limit(),
        Some((Duration::from_millis(500), Layer::Http))
    );
}
