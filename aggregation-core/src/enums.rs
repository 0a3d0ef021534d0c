//! `string_enum!`: closed sets of string values (a record's type, a connection's state, an
//! upload format) declared once, with their names in one place.

/// Declares a closed set of lowercase string values with `as_str`, `parse` and `ALL`, a
/// `Display` that writes the name, and its schema (a string enum) for the OpenAPI document.
///
/// `Name { Variant => "name", … }` declares a `pub` enum (the store's record types);
/// `pub(crate) enum Name { … }` (any visibility, with `enum`) declares one of that visibility,
/// its `ALL`, `as_str` and `parse` as visible as the enum.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident => $text:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        $vis enum $name {
            $($(#[$variant_meta])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            $vis const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The value's name in JSON, query strings and the store.
            $vis fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            /// Parses a name (exact, lowercase); `None` for an unknown one.
            #[allow(dead_code, reason = "a set read only through `query::choice` parses no text itself")]
            $vis fn parse(name: &str) -> Option<Self> {
                match name {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        /// A string restricted to the names (in the OpenAPI document).
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
    (
        $(#[$meta:meta])*
        $name:ident { $($(#[$variant_meta:meta])* $variant:ident => $text:literal),+ $(,)? }
    ) => {
        string_enum! {
            $(#[$meta])*
            pub enum $name { $($(#[$variant_meta])* $variant => $text),+ }
        }
    };
}

pub(crate) use string_enum;
