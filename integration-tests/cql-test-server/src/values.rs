//! CQL types and values: decoding bound values, encoding result cells, comparing.

use std::cmp::Ordering;
use std::net::IpAddr;

/// The column types the server knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CqlType {
    /// `ascii`
    Ascii,
    /// `bigint`
    BigInt,
    /// `boolean`
    Boolean,
    /// `blob`
    Blob,
    /// `int`
    Int,
    /// `text` / `varchar`
    Text,
    /// `uuid`
    Uuid,
    /// `inet`
    Inet,
    /// `timestamp`
    Timestamp,
    /// `set<T>`
    Set(Box<CqlType>),
    /// `list<T>`
    List(Box<CqlType>),
    /// `map<K, V>`
    Map(Box<CqlType>, Box<CqlType>),
}

impl CqlType {
    /// Parses a type name with its parameters.
    pub fn from_name(name: &str, params: Vec<CqlType>) -> Result<CqlType, String> {
        let mut params = params.into_iter();
        let t = match (name, params.len()) {
            ("ascii", 0) => CqlType::Ascii,
            ("bigint", 0) => CqlType::BigInt,
            ("boolean", 0) => CqlType::Boolean,
            ("blob", 0) => CqlType::Blob,
            ("int", 0) => CqlType::Int,
            ("text" | "varchar", 0) => CqlType::Text,
            ("uuid", 0) => CqlType::Uuid,
            ("inet", 0) => CqlType::Inet,
            ("timestamp", 0) => CqlType::Timestamp,
            ("set", 1) => CqlType::Set(Box::new(params.next().ok_or("set<T>")?)),
            ("list", 1) => CqlType::List(Box::new(params.next().ok_or("list<T>")?)),
            ("map", 2) => {
                let k = params.next().ok_or("map<K, V>")?;
                let v = params.next().ok_or("map<K, V>")?;
                CqlType::Map(Box::new(k), Box::new(v))
            }
            _ => return Err(format!("unknown type {name}")),
        };
        Ok(t)
    }

    /// Writes the type as a protocol `[option]`.
    pub fn write_option(&self, out: &mut Vec<u8>) {
        let id: u16 = match self {
            CqlType::Ascii => 0x0001,
            CqlType::BigInt => 0x0002,
            CqlType::Boolean => 0x0004,
            CqlType::Blob => 0x0003,
            CqlType::Int => 0x0009,
            CqlType::Text => 0x000D,
            CqlType::Uuid => 0x000C,
            CqlType::Inet => 0x0010,
            CqlType::Timestamp => 0x000B,
            CqlType::Set(_) => 0x0022,
            CqlType::List(_) => 0x0020,
            CqlType::Map(..) => 0x0021,
        };
        out.extend_from_slice(&id.to_be_bytes());
        match self {
            CqlType::Set(t) | CqlType::List(t) => t.write_option(out),
            CqlType::Map(k, v) => {
                k.write_option(out);
                v.write_option(out);
            }
            _ => {}
        }
    }
}

/// A value in a cell, a bound variable or a literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `null`
    Null,
    /// boolean
    Bool(bool),
    /// int
    Int(i32),
    /// bigint or timestamp
    BigInt(i64),
    /// text or ascii
    Text(String),
    /// blob
    Blob(Vec<u8>),
    /// uuid
    Uuid([u8; 16]),
    /// inet
    Inet(IpAddr),
    /// set
    Set(Vec<Value>),
    /// map
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// Decodes a bound value of type `t`.
    pub fn decode(t: &CqlType, bytes: &[u8]) -> Result<Value, String> {
        let fixed = |n: usize| {
            if bytes.len() == n {
                Ok(bytes)
            } else {
                Err(format!("expected {n} bytes for {t:?}, got {}", bytes.len()))
            }
        };
        Ok(match t {
            CqlType::Ascii | CqlType::Text => Value::Text(
                String::from_utf8(bytes.to_vec()).map_err(|_| "invalid UTF-8".to_owned())?,
            ),
            CqlType::BigInt | CqlType::Timestamp => Value::BigInt(i64::from_be_bytes(
                fixed(8)?.try_into().map_err(|_| "bigint")?,
            )),
            CqlType::Int => {
                Value::Int(i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| "int")?))
            }
            CqlType::Boolean => Value::Bool(fixed(1)?[0] != 0),
            CqlType::Blob => Value::Blob(bytes.to_vec()),
            CqlType::Uuid => Value::Uuid(fixed(16)?.try_into().map_err(|_| "uuid")?),
            CqlType::Inet => match bytes.len() {
                4 => Value::Inet(IpAddr::from(
                    <[u8; 4]>::try_from(bytes).map_err(|_| "inet")?,
                )),
                16 => Value::Inet(IpAddr::from(
                    <[u8; 16]>::try_from(bytes).map_err(|_| "inet")?,
                )),
                n => return Err(format!("inet of {n} bytes")),
            },
            CqlType::Set(_) | CqlType::List(_) | CqlType::Map(..) => {
                return Err("collections cannot be bound in this server".into());
            }
        })
    }

    /// Encodes the value as cell bytes; `None` for null.
    pub fn encode(&self) -> Option<Vec<u8>> {
        Some(match self {
            Value::Null => return None,
            Value::Bool(b) => vec![u8::from(*b)],
            Value::Int(v) => v.to_be_bytes().to_vec(),
            Value::BigInt(v) => v.to_be_bytes().to_vec(),
            Value::Text(s) => s.as_bytes().to_vec(),
            Value::Blob(b) => b.clone(),
            Value::Uuid(u) => u.to_vec(),
            Value::Inet(IpAddr::V4(a)) => a.octets().to_vec(),
            Value::Inet(IpAddr::V6(a)) => a.octets().to_vec(),
            Value::Set(items) => {
                let mut out = (items.len() as i32).to_be_bytes().to_vec();
                for item in items {
                    push_bytes(&mut out, item.encode());
                }
                out
            }
            Value::Map(entries) => {
                let mut out = (entries.len() as i32).to_be_bytes().to_vec();
                for (k, v) in entries {
                    push_bytes(&mut out, k.encode());
                    push_bytes(&mut out, v.encode());
                }
                out
            }
        })
    }

    /// Orders two values of the same type (`None` when they cannot be compared).
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::BigInt(a), Value::BigInt(b)) => Some(a.cmp(b)),
            (Value::Text(a), Value::Text(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            (Value::Blob(a), Value::Blob(b)) => Some(a.cmp(b)),
            (Value::Uuid(a), Value::Uuid(b)) => Some(a.cmp(b)),
            (a, b) if a == b => Some(Ordering::Equal),
            _ => None,
        }
    }

    /// The value as CQL would print it (for messages and counters).
    pub fn display(&self) -> String {
        match self {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Int(n) => n.to_string(),
            Value::BigInt(n) => n.to_string(),
            Value::Text(s) => s.clone(),
            Value::Inet(ip) => ip.to_string(),
            other => format!("{other:?}"),
        }
    }

    /// A total order: values of one type by [`Value::compare`], anything else by encoding.
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        self.compare(other)
            .unwrap_or_else(|| self.key_bytes().cmp(&other.key_bytes()))
    }

    /// A key for ordering partitions.
    pub fn key_bytes(&self) -> Vec<u8> {
        self.encode().unwrap_or_default()
    }
}

/// Appends a protocol `[bytes]` (length-prefixed, -1 for null).
pub fn push_bytes(out: &mut Vec<u8>, bytes: Option<Vec<u8>>) {
    match bytes {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(&b);
        }
    }
}

/// Appends a protocol `[string]`.
pub fn push_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}
