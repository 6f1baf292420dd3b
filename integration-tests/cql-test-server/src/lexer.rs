//! Tokens of the CQL subset, with Cassandra's reserved keywords.

/// Keywords Cassandra 4 reserves: they cannot be unquoted identifiers.
pub const RESERVED: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "delete",
    "desc",
    "describe",
    "drop",
    "entries",
    "execute",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "limit",
    "materialized",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "replace",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "truncate",
    "unlogged",
    "unset",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// An identifier or keyword; unquoted ones are lower-cased.
    Ident {
        /// The name.
        name: String,
        /// Written in double quotes.
        quoted: bool,
    },
    /// A `'string'` literal.
    Str(String),
    /// A number literal, as written.
    Num(String),
    /// A `?` bind marker.
    Marker,
    /// Punctuation or an operator.
    Sym(&'static str),
}

impl Token {
    /// Whether this is the unquoted keyword `kw` (lower case).
    pub fn is_kw(&self, kw: &str) -> bool {
        matches!(self, Token::Ident { name, quoted: false } if name == kw)
    }
}

const SYMBOLS: &[&str] = &[
    "<=", ">=", "!=", "(", ")", ",", ".", "=", "<", ">", "*", "{", "}", ":", ";", "[", "]",
];

/// Splits a statement into tokens.
pub fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("unterminated string literal".into()),
                    Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                        s.push('\'');
                        i += 2;
                    }
                    Some('\'') => break,
                    Some(ch) => {
                        s.push(*ch);
                        i += 1;
                    }
                }
            }
            i += 1;
            out.push(Token::Str(s));
        } else if c == '"' {
            let start = i + 1;
            let end = (start..chars.len())
                .find(|&j| chars[j] == '"')
                .ok_or("unterminated quoted name")?;
            out.push(Token::Ident {
                name: chars[start..end].iter().collect(),
                quoted: true,
            });
            i = end + 1;
        } else if c == '?' {
            out.push(Token::Marker);
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            i += 1;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '-' || chars[i] == '.')
            {
                i += 1;
            }
            out.push(Token::Num(chars[start..i].iter().collect()));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push(Token::Ident {
                name: word.to_ascii_lowercase(),
                quoted: false,
            });
        } else if let Some(sym) = SYMBOLS.iter().find(|s| {
            let s: Vec<char> = s.chars().collect();
            chars[i..].starts_with(&s)
        }) {
            out.push(Token::Sym(sym));
            i += sym.len();
        } else {
            return Err(format!("unexpected character {c:?}"));
        }
    }
    Ok(out)
}
