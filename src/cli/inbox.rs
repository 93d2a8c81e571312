//! `hookgate inbox list`: what the inbox holds, without bodies.

use super::{InboxCommand, Output};
use crate::inbox::{EventSummary, Inbox, ListFilter};

pub async fn run(command: InboxCommand) -> anyhow::Result<()> {
    let InboxCommand::List {
        database_url,
        integration,
        status,
        output,
        limit,
    } = command;
    let inbox = Inbox::connect_as(&database_url, "hookgate inbox", Default::default()).await?;
    inbox.migrate().await?;
    let rows = inbox
        .list(&ListFilter {
            integration,
            status,
            limit,
        })
        .await?;
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Output::Table => print!("{}", table(&rows)),
    }
    Ok(())
}

fn table(rows: &[EventSummary]) -> String {
    let mut out = format!(
        "{:<6} {:<28} {:<36} {:<32} {:<11} {:<8} {:<8} {}\n",
        "ID", "INTEGRATION", "EVENT_ID", "TYPE", "STATUS", "KEY", "ATTEMPTS", "RECEIVED"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<6} {:<28} {:<36} {:<32} {:<11} {:<8} {:<8} {}\n",
            r.id,
            r.integration,
            r.event_id,
            r.event_type.as_deref().unwrap_or("-"),
            r.status,
            r.key_id,
            r.attempts,
            r.received_at.format("%Y-%m-%dT%H:%M:%SZ")
        ));
    }
    out
}
