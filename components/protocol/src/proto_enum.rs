//! ProtoJSON enums: written as their SCREAMING_SNAKE names, read from names or integers.

/// Declares a protobuf enum with ProtoJSON serde: serialised as its name, deserialised from the
/// name (case-sensitive, as ProtoJSON) or from its integer number.
#[macro_export]
macro_rules! proto_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $num:literal => $wire:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            /// The ProtoJSON name.
            pub fn as_str(self) -> &'static str { match self { $(Self::$variant => $wire),+ } }
            /// The protobuf number.
            pub fn number(self) -> i64 { match self { $(Self::$variant => $num),+ } }
            /// Parses a ProtoJSON name.
            pub fn from_name(s: &str) -> Option<Self> { match s { $($wire => Some(Self::$variant),)+ _ => None } }
            /// Parses a protobuf number.
            pub fn from_number(n: i64) -> Option<Self> { match n { $($num => Some(Self::$variant),)+ _ => None } }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> { s.serialize_str(self.as_str()) }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                use serde::de::Error;
                match serde_json::Value::deserialize(d)? {
                    serde_json::Value::String(s) => Self::from_name(&s)
                        .ok_or_else(|| D::Error::custom(format!("unknown {} {s:?}", stringify!($name)))),
                    serde_json::Value::Number(n) => n.as_i64().and_then(Self::from_number)
                        .ok_or_else(|| D::Error::custom(format!("unknown {} number {n}", stringify!($name)))),
                    other => Err(D::Error::custom(format!("{} must be a name or a number, not {other}", stringify!($name)))),
                }
            }
        }
    };
}
