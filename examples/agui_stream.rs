//! Folds AG-UI event streams and prints a compact view of the chat state after each event.
//!
//! ```text
//! cargo run --example agui_stream --features ag-ui                 # every fixture in examples/data/
//! cargo run --example agui_stream --features ag-ui -- tool_calls   # one fixture, by name
//! cargo run --example agui_stream --features ag-ui -- path/to/events.json
//! cargo run --example agui_stream --features ag-ui -- --json chunks  # the result as JSON
//! ```
//!
//! Each input is a JSON array of AG-UI events. After each event the view shows the phase, every
//! message (`…` streaming, `✗` interrupted) with its tool calls and their results, the shared
//! state, and any error the event surfaced. With `--json`, it prints instead one line per input:
//! `{"messages", "state", "ignored"}`, the shape of the fixtures' `.expected.json` (the message
//! list the official client would hold, the shared state, the indices of the ignored events).

use agentstate::agui::{ApplyOutcome, ChatMessage, ChatState, Event, StreamStatus};
use std::error::Error;
use std::path::{Path, PathBuf};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data");
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.first().is_some_and(|a| a == "--json");
    if json {
        args.remove(0);
    }
    let files: Vec<PathBuf> = if args.is_empty() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
            .map_err(|e| format!("cannot list {}: {e}", data.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                name.ends_with(".json") && !name.ends_with(".expected.json")
            })
            .collect();
        files.sort();
        files
    } else {
        args.iter()
            .map(|arg| {
                let path = PathBuf::from(arg);
                if path.exists() {
                    path
                } else {
                    data.join(format!("{arg}.json"))
                }
            })
            .collect()
    };
    for file in files {
        if json {
            show_json(&file)?;
        } else {
            show(&file)?;
        }
    }
    Ok(())
}

fn read(file: &Path) -> Result<Vec<Event>, Box<dyn Error>> {
    let json = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let events = Event::parse_array(&json)
        .map_err(|e| format!("{} is not an AG-UI event array: {e}", file.display()))?;
    Ok(events)
}

fn show_json(file: &Path) -> Result<(), Box<dyn Error>> {
    let mut chat = ChatState::new();
    let mut ignored = Vec::new();
    for (i, event) in read(file)?.iter().enumerate() {
        if let ApplyOutcome::Ignored(_) = chat.apply(event) {
            ignored.push(i);
        }
    }
    let result = serde_json::json!({
        "messages": chat.to_agui_messages(),
        "state": chat.agent_state(),
        "ignored": ignored,
    });
    println!("{result}");
    Ok(())
}

fn show(file: &Path) -> Result<(), Box<dyn Error>> {
    let events = read(file)?;
    println!("== {} ({} events)", file.display(), events.len());
    let mut chat = ChatState::new();
    for (i, event) in events.iter().enumerate() {
        let outcome = chat.apply(event);
        println!(
            "#{:<2} {:<26} phase {} · {} message(s) · state {}",
            i + 1,
            event.event_type(),
            chat.phase(),
            chat.messages().len(),
            clip(&chat.agent_state().to_string(), 60)
        );
        for message in chat.messages() {
            println!("      {}", line(&chat, message));
        }
        match outcome {
            ApplyOutcome::Applied => {}
            ApplyOutcome::Ignored(error) | ApplyOutcome::Dropped(error) => {
                println!("      ! {error}")
            }
            ApplyOutcome::Conflict(conflict) => println!("      ! {conflict}"),
            other => println!("      ! {other:?}"),
        }
    }
    println!();
    Ok(())
}

fn line(chat: &ChatState, message: &ChatMessage) -> String {
    let mark = match message.status() {
        StreamStatus::Streaming => "…",
        StreamStatus::Complete => " ",
        StreamStatus::Interrupted => "✗",
    };
    let mut line = format!(
        "{:<10} {:<9}{mark} {:?}",
        message.id(),
        message.role().as_str(),
        clip(&message.text(), 50)
    );
    if let Some(subagent) = message.message().subagent_run_id() {
        line.push_str(&format!(" (subagent {subagent})"));
    }
    for call in message.tool_calls() {
        let Some(view) = chat.tool_call(&call.id) else {
            continue;
        };
        let status = if view.status == StreamStatus::Streaming {
            "…"
        } else {
            ""
        };
        line.push_str(&format!(
            " [{}({}){status}",
            view.name(),
            clip(&call.function.arguments, 30)
        ));
        if let Some(result) = view.result {
            line.push_str(&format!(" → {:?}", clip(&result.content.text(), 30)));
        }
        line.push(']');
    }
    line
}

/// `text` cut to `max` characters, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut clipped: String = text.chars().take(max - 1).collect();
        clipped.push('…');
        clipped
    }
}
