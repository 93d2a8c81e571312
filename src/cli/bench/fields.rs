//! Reading an event's fields (id and type) from its JSON body: the receiver's one pass
//! (`route::json_pointers`) against what it did before, the body parsed into a
//! `serde_json::Value` and read with `Value::pointer`. On the intake's padded body and on a
//! Stripe event of the usual shape, where most of what a `Value` would allocate is never read.

use super::rounds::alternate;
use super::verify::Case;
use crate::route::json_pointers::Pointers;
use serde_json::{Value, json};
use std::hint::black_box;

const POINTERS: [&str; 2] = ["/id", "/type"];

/// An `invoice.paid` as Stripe sends it (fields of its API reference, values made up), 3.6 KiB
/// pretty-printed: nested objects, a list of lines, numbers, booleans and nulls.
fn stripe_event() -> Vec<u8> {
    let line = |n: u32| {
        json!({
            "id": format!("il_1PqR{n}sT2uVwXyZ"), "object": "line_item", "amount": 1500 * n,
            "currency": "usd", "description": format!("{n} x Pro plan (at $15.00 / month)"),
            "discountable": true, "livemode": false, "metadata": {},
            "period": {"end": 1735689600, "start": 1733011200},
            "price": {"id": "price_1Nx", "object": "price", "active": true, "currency": "usd",
                      "product": "prod_Pro", "unit_amount": 1500, "type": "recurring",
                      "recurring": {"interval": "month", "interval_count": 1}},
            "proration": false, "quantity": n, "type": "subscription", "tax_amounts": []
        })
    };
    // Two halves: one `json!` of the whole invoice passes the macro's recursion limit.
    let mut invoice = json!({
        "id": "in_1QbC2dEfGhIjKlMn", "object": "invoice", "account_country": "US",
        "account_name": "Example Inc.", "amount_due": 4500, "amount_paid": 4500,
        "amount_remaining": 0, "attempt_count": 1, "attempted": true,
        "billing_reason": "subscription_cycle", "charge": "ch_3QbC2dEfGhIjKlMn",
        "collection_method": "charge_automatically", "created": 1733011200,
        "currency": "usd", "customer": "cus_RaBcDeFgHiJk", "customer_email": "jane@example.com",
        "customer_name": "Jane Doe", "customer_address": null, "default_payment_method": null,
        "description": null, "discount": null, "due_date": null, "ending_balance": 0
    });
    let rest = json!({
        "hosted_invoice_url": "https://invoice.stripe.com/i/acct_1/test_YWNjdF8x",
        "invoice_pdf": "https://pay.stripe.com/invoice/acct_1/test_YWNjdF8x/pdf",
        "lines": {"object": "list", "data": [line(1), line(2)], "has_more": false,
                  "total_count": 2, "url": "/v1/invoices/in_1QbC2dEfGhIjKlMn/lines"},
        "livemode": false, "metadata": {"order": "A-1042"}, "number": "EXMPL-0042",
        "paid": true, "period_end": 1733011200, "period_start": 1730419200,
        "status": "paid", "subscription": "sub_1QbC2dEfGhIjKlMn", "subtotal": 4500,
        "tax": null, "total": 4500, "total_tax_amounts": [], "webhooks_delivered_at": null
    });
    if let (Some(invoice), Value::Object(rest)) = (invoice.as_object_mut(), rest) {
        invoice.extend(rest);
    }
    let event = json!({
        "id": "evt_1QbC2dEfGhIjKlMn", "object": "event", "api_version": "2024-06-20",
        "created": 1733011260, "data": {"object": invoice},
        "livemode": false, "pending_webhooks": 1,
        "request": {"id": null, "idempotency_key": "0d9f4c1e-6a57-4f3b-9a8e-2c1b5d7e9f10"},
        "type": "invoice.paid"
    });
    serde_json::to_vec_pretty(&event).expect("a JSON value serializes")
}

fn case(label: &str, body: &[u8], iters: usize) -> Case {
    // Split once, as a route build does.
    let pointers = Pointers::new(POINTERS);
    let ours = || {
        let found = pointers.read(black_box(body)).map(|f| f.into_values());
        found.is_some_and(|f| {
            f.iter()
                .all(|v| v.as_ref().and_then(|v| v.text()).is_some())
        })
    };
    let parsed = || {
        let Ok(json) = serde_json::from_slice::<Value>(black_box(body)) else {
            return false;
        };
        POINTERS.iter().all(|p| {
            json.pointer(p)
                .and_then(Value::as_str)
                .map(str::to_string)
                .is_some()
        })
    };
    let (hookgate, baseline) = alternate(iters, ours, parsed);
    let kib = body.len() as f64 / 1024.0;
    Case {
        name: format!("event id and type, {label} ({kib:.1} KiB)"),
        hookgate,
        baseline_name: format!("serde_json Value + pointer, {label}"),
        baseline,
        ratio_name: format!("fields / serde_json Value, {label}"),
        // The one pass exists to be cheaper; slower than the document it replaced would be a defect.
        target: 1.0,
        floor: None,
    }
}

/// Sized like the verification cases: about a second each in a release build.
pub fn run(scale: usize) -> Vec<Case> {
    vec![
        case(
            "intake body",
            &super::requests::body(0, 1024),
            (200_000 / scale).max(1),
        ),
        case("Stripe event", &stripe_event(), (100_000 / scale).max(1)),
    ]
}
