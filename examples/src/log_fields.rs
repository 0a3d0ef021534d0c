//! The fields of a text log line (`name=value`, space separated), written as
//! `tracing_subscriber`'s `DefaultFields` writes them, with less formatting machinery when the
//! output has no colours.
//!
//! Each request formats about ten fields (the request span's four, its route, the access line's
//! six). Without colours, `DefaultFields` still paints every name and `=` with an empty style
//! through a nested `write!`; here they are written as they are. With colours, and for the
//! fields whose text `DefaultFields` escapes or decorates (the message, errors), the default
//! visitor writes the field, so the line is the same byte for byte either way.

use std::cell::RefCell;
use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{RecordFields, VisitOutput as _};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct PlainFields;

impl<'writer> FormatFields<'writer> for PlainFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        if writer.has_ansi_escapes() {
            return visit(writer, fields);
        }
        // A span's fields go to a string of their own, which would grow (and move) several
        // times field by field; staged here first, they reach it in one piece.
        STAGED.with(|staged| match staged.try_borrow_mut() {
            Ok(mut staged) => {
                staged.clear();
                let result = visit(Writer::new(&mut *staged), fields);
                let written = writer.write_str(&staged);
                if staged.capacity() > STAGED_KEPT {
                    *staged = String::new();
                }
                result.and(written)
            }
            // A value whose formatting logs: that line is written directly.
            Err(_) => visit(writer, fields),
        })
    }
}

/// Bytes of staging space a thread keeps between lines.
const STAGED_KEPT: usize = 16 * 1024;

thread_local! {
    static STAGED: RefCell<String> = const { RefCell::new(String::new()) };
}

fn visit(writer: Writer<'_>, fields: impl RecordFields) -> fmt::Result {
    let mut visitor = PlainVisitor {
        writer,
        is_empty: true,
        result: Ok(()),
    };
    fields.record(&mut visitor);
    visitor.result
}

struct PlainVisitor<'writer> {
    writer: Writer<'writer>,
    /// Whether nothing was written yet (no separating space before the first field).
    is_empty: bool,
    result: fmt::Result,
}

impl PlainVisitor<'_> {
    /// Hands one field to `DefaultFields`' own visitor, which pads it as it would have.
    fn default_visitor(&mut self, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        let mut visitor = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        record(&mut visitor);
        self.result = visitor.finish();
        self.is_empty = false;
    }
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        if field.name() == "message" {
            self.default_visitor(|visitor| visitor.record_str(field, value));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.result.is_err() {
            return;
        }
        self.default_visitor(|visitor| visitor.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let name = field.name();
        if name == "message" || self.writer.has_ansi_escapes() {
            self.default_visitor(|visitor| visitor.record_debug(field, value));
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.result = self.write_field(name, value);
    }
}

impl PlainVisitor<'_> {
    fn write_field(&mut self, name: &str, value: &dyn fmt::Debug) -> fmt::Result {
        if self.is_empty {
            self.is_empty = false;
        } else {
            self.writer.write_char(' ')?;
        }
        self.writer.write_str(name)?;
        self.writer.write_char('=')?;
        write!(self.writer, "{value:?}")
    }
}

#[cfg(test)]
mod tests {
    use aggregation_core::testing::CapturedLog;
    use tracing_subscriber::fmt::format::DefaultFields;

    use super::*;

    /// Every kind of field, in a span (with a field recorded later) and an event.
    fn log_everything() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer \u{1b}[31m")]
        struct Outer(#[source] std::io::Error);
        let error = Outer(std::io::Error::other("inner"));
        let span = tracing::info_span!(
            "request",
            trace_id = %"4bf92f3577b34da6a3ce929d0e0e4736",
            method = %http::Method::GET,
            path = %"/api/v1/accounts",
            route = tracing::field::Empty,
            r#type = "raw",
        );
        span.record("route", tracing::field::display("/api/v1/accounts/{id}"));
        span.in_scope(|| {
            tracing::info!(
                route = Some("/api/v1/accounts"),
                none = None::<&str>,
                status = 200_u16,
                signed = -3_i64,
                yes = true,
                elapsed_ms = 1.25_f64,
                text = "quoted \"text\"\n",
                debug = ?vec![1, 2],
                error = &error as &(dyn std::error::Error + 'static),
                "request \u{1b}[1m{}", 7
            );
            tracing::warn!("only a message");
            tracing::warn!(field = 1);
        });
    }

    fn output_of(fields: impl for<'w> FormatFields<'w> + Send + Sync + 'static) -> String {
        let out = CapturedLog::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(out.clone())
            .with_ansi(false)
            .without_time()
            .fmt_fields(fields)
            .finish();
        tracing::subscriber::with_default(subscriber, log_everything);
        let bytes = out.take();
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn lines_are_those_of_the_default_fields() {
        let plain = output_of(PlainFields);
        assert_eq!(plain, output_of(DefaultFields::new()));
        assert!(plain.contains("elapsed_ms=1.25"), "{plain}");
    }

    /// A span and an event at every level, and an event at every level inside the span.
    fn log_at_every_level() {
        let span = tracing::debug_span!("job", kind = "sync");
        span.in_scope(|| {
            tracing::trace!("trace inside");
            tracing::debug!("debug inside");
            tracing::info!(status = 200_u16, "info inside");
            tracing::warn!("warn inside");
            tracing::error!("error inside");
        });
        let outer = tracing::info_span!("request", route = tracing::field::Empty);
        outer.record("route", "/api/v1/accounts");
        outer.in_scope(|| {
            tracing::debug!("debug in request");
            tracing::info!("info in request");
            tracing::error!("error in request");
        });
    }

    fn log_at_every_level_to(subscriber: impl tracing::Subscriber + Send + Sync) {
        tracing::subscriber::with_default(subscriber, log_at_every_level);
    }

    /// The reference server replaces an `AGG_LOG` that is one level by a plain level filter:
    /// the lines are those `EnvFilter` lets through.
    #[test]
    fn a_plain_level_filter_lets_through_the_lines_of_env_filter() {
        for level in [
            "off", "error", "warn", "info", "debug", "trace", "INFO", "3",
        ] {
            let plain = level
                .parse::<tracing_subscriber::filter::LevelFilter>()
                .expect("a level");
            let by_level = CapturedLog::default();
            let by_env = CapturedLog::default();
            let base = |out: &CapturedLog| {
                tracing_subscriber::fmt()
                    .with_writer(out.clone())
                    .with_ansi(false)
                    .without_time()
                    .fmt_fields(PlainFields)
            };
            log_at_every_level_to(base(&by_level).with_max_level(plain).finish());
            let env = tracing_subscriber::EnvFilter::try_new(level).expect("a directive");
            log_at_every_level_to(base(&by_env).with_env_filter(env).finish());
            let by_level = by_level.take();
            let by_env = by_env.take();
            assert_eq!(
                String::from_utf8_lossy(&by_level),
                String::from_utf8_lossy(&by_env),
                "AGG_LOG={level}"
            );
            if level == "info" {
                let text = String::from_utf8_lossy(&by_level);
                assert!(text.contains("info in request"), "{text}");
                assert!(!text.contains("debug"), "{text}");
            }
        }
    }

    /// A clock standing still, so that two outputs can be compared.
    #[derive(Clone)]
    struct Stopped;

    impl tracing_subscriber::fmt::time::FormatTime for Stopped {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            w.write_str("2026-11-27T09:25:20.123456Z")
        }
    }

    /// Nested spans, a span without fields, events outside any span, every level.
    fn log_in_nested_spans() {
        tracing::trace!("no span");
        let outer = tracing::info_span!("outer", id = 7);
        let _outer = outer.enter();
        let bare = tracing::info_span!("bare");
        bare.in_scope(|| {
            tracing::debug!(inner = true, "in bare");
            tracing::error!("error in bare");
        });
        tracing::warn!(flag = ?Some(1));
        log_everything();
    }

    fn lines_of(subscriber: impl tracing::Subscriber + Send + Sync, out: &CapturedLog) -> String {
        tracing::subscriber::with_default(subscriber, || {
            log_everything();
            log_in_nested_spans();
        });
        let bytes = out.take();
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn text_lines_are_those_of_the_default_format() {
        for ansi in [false, true] {
            let base = |out: &CapturedLog| {
                tracing_subscriber::fmt()
                    .with_writer(out.clone())
                    .with_ansi(ansi)
                    .with_max_level(tracing::Level::TRACE)
                    .fmt_fields(PlainFields)
            };
            let ours = CapturedLog::default();
            let ours = lines_of(
                base(&ours)
                    .event_format(crate::log_event::TextLine::new(Stopped))
                    .finish(),
                &ours,
            );
            let default = CapturedLog::default();
            let default = lines_of(base(&default).with_timer(Stopped).finish(), &default);
            assert_eq!(ours, default, "ansi: {ansi}");
            if !ansi {
                assert!(
                    ours.contains("2026-11-27T09:25:20.123456Z  INFO outer{id=7}:request{"),
                    "{ours}"
                );
                assert!(ours.contains("outer{id=7}:bare: "), "{ours}");
            }
        }
    }
}
