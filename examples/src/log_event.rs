//! A text log line, written as `tracing_subscriber`'s default (`Full`) format writes it when
//! the output has no colours, with one write per part instead of a formatting call for each.
//!
//! `timestamp LEVEL span{fields}:span{fields}: target: fields`: the default format pads the
//! level, paints each part with an empty style and goes through `write!` for all of them. Lines
//! with colours, and the events the `log` crate hands over (whose target and place the default
//! format reads from their fields), are left to the default format, so every line is the same
//! byte for byte.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct TextLine<T> {
    timer: T,
    default: Format<Full, T>,
}

impl<T: FormatTime + Clone> TextLine<T> {
    /// Lines stamped by `timer`.
    pub(crate) fn new(timer: T) -> Self {
        Self {
            default: Format::default().with_timer(timer.clone()),
            timer,
        }
    }
}

impl<S, N, T> FormatEvent<S, N> for TextLine<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        // The `log` crate's events carry their target in this field.
        if writer.has_ansi_escapes() || meta.fields().field("log.target").is_some() {
            return self.default.format_event(ctx, writer, event);
        }
        // A clock that cannot be read does not cost the line.
        if self.timer.format_time(&mut writer).is_err() {
            writer.write_str("<unknown time>")?;
        }
        writer.write_str(match *meta.level() {
            Level::TRACE => " TRACE ",
            Level::DEBUG => " DEBUG ",
            Level::INFO => "  INFO ",
            Level::WARN => "  WARN ",
            Level::ERROR => " ERROR ",
        })?;
        if let Some(scope) = ctx.event_scope() {
            let mut seen = false;
            for span in scope.from_root() {
                writer.write_str(span.metadata().name())?;
                seen = true;
                if let Some(fields) = span.extensions().get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    writer.write_char('{')?;
                    writer.write_str(fields)?;
                    writer.write_char('}')?;
                }
                writer.write_char(':')?;
            }
            if seen {
                writer.write_char(' ')?;
            }
        }
        writer.write_str(meta.target())?;
        writer.write_str(": ")?;
        ctx.format_fields(writer.by_ref(), event)?;
        writer.write_char('\n')
    }
}
