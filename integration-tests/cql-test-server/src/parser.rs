//! A parser for the CQL subset the project and the driver send.

pub use super::ast::*;
use super::lexer::{RESERVED, Token, tokenize};

/// Why a statement did not parse: Cassandra answers these with a syntax error.
pub type SyntaxError = String;

/// Parses one statement.
pub fn parse(text: &str) -> Result<Statement, SyntaxError> {
    let tokens = tokenize(text)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        markers: 0,
    };
    let statement = p.statement()?;
    p.eat_sym(";");
    if p.pos != p.tokens.len() {
        return Err(format!("unexpected input at {:?}", p.tokens[p.pos]));
    }
    Ok(statement)
}

pub(super) struct Parser {
    pub(super) tokens: Vec<Token>,
    pub(super) pos: usize,
    pub(super) markers: usize,
}

impl Parser {
    pub(super) fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    pub(super) fn next(&mut self) -> Result<Token, SyntaxError> {
        let t = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or("unexpected end of statement")?;
        self.pos += 1;
        Ok(t)
    }

    pub(super) fn eat_kw(&mut self, kw: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.is_kw(kw));
        if hit {
            self.pos += 1;
        }
        hit
    }

    pub(super) fn kw(&mut self, kw: &str) -> Result<(), SyntaxError> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(format!(
                "expected {} at {:?}",
                kw.to_uppercase(),
                self.peek()
            ))
        }
    }

    pub(super) fn eat_sym(&mut self, sym: &str) -> bool {
        let hit = matches!(self.peek(), Some(Token::Sym(s)) if *s == sym);
        if hit {
            self.pos += 1;
        }
        hit
    }

    pub(super) fn sym(&mut self, sym: &str) -> Result<(), SyntaxError> {
        if self.eat_sym(sym) {
            Ok(())
        } else {
            Err(format!("expected '{sym}' at {:?}", self.peek()))
        }
    }

    /// An identifier; a reserved keyword is only accepted in double quotes.
    pub(super) fn ident(&mut self) -> Result<String, SyntaxError> {
        match self.next()? {
            Token::Ident { name, quoted: true } => Ok(name),
            Token::Ident {
                name,
                quoted: false,
            } if RESERVED.contains(&name.as_str()) => Err(format!(
                "no viable alternative at input '{name}' (reserved keyword)"
            )),
            Token::Ident { name, .. } => Ok(name),
            other => Err(format!("expected an identifier, found {other:?}")),
        }
    }

    pub(super) fn table_ref(&mut self) -> Result<TableRef, SyntaxError> {
        let first = self.ident()?;
        if self.eat_sym(".") {
            Ok(TableRef {
                keyspace: Some(first),
                table: self.ident()?,
            })
        } else {
            Ok(TableRef {
                keyspace: None,
                table: first,
            })
        }
    }

    pub(super) fn term(&mut self) -> Result<Term, SyntaxError> {
        Ok(match self.next()? {
            Token::Marker => {
                self.markers += 1;
                Term::Marker(self.markers - 1)
            }
            Token::Str(s) => Term::Str(s),
            Token::Num(n) => Term::Num(n),
            t if t.is_kw("null") => Term::Null,
            t if t.is_kw("true") => Term::Bool(true),
            t if t.is_kw("false") => Term::Bool(false),
            other => return Err(format!("expected a value, found {other:?}")),
        })
    }

    fn statement(&mut self) -> Result<Statement, SyntaxError> {
        match self.next()? {
            t if t.is_kw("select") => self.select(),
            t if t.is_kw("update") => self.update(),
            t if t.is_kw("insert") => self.insert(),
            t if t.is_kw("delete") => self.delete(),
            t if t.is_kw("create") => self.create(),
            t if t.is_kw("use") => Ok(Statement::Use(self.ident()?)),
            other => Err(format!("unsupported statement starting with {other:?}")),
        }
    }

    fn select(&mut self) -> Result<Statement, SyntaxError> {
        let mut selectors = Vec::new();
        if !self.eat_sym("*") {
            loop {
                let is_fn = |p: &Self, f: &str| {
                    p.peek().is_some_and(|t| t.is_kw(f))
                        && matches!(p.tokens.get(p.pos + 1), Some(Token::Sym("(")))
                };
                if is_fn(self, "ttl") || is_fn(self, "writetime") {
                    let ttl = self.next()?.is_kw("ttl");
                    self.sym("(")?;
                    let col = self.ident()?;
                    self.sym(")")?;
                    selectors.push(if ttl {
                        Selector::Ttl(col)
                    } else {
                        Selector::WriteTime(col)
                    });
                } else {
                    selectors.push(Selector::Column(self.ident()?));
                }
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        self.kw("from")?;
        let table = self.table_ref()?;
        let relations = if self.eat_kw("where") {
            self.relations()?
        } else {
            Vec::new()
        };
        let mut order_desc = None;
        if self.eat_kw("order") {
            self.kw("by")?;
            self.ident()?;
            order_desc = Some(if self.eat_kw("desc") {
                true
            } else {
                self.eat_kw("asc");
                false
            });
        }
        let limit = if self.eat_kw("limit") {
            Some(self.term()?)
        } else {
            None
        };
        if self.eat_kw("allow") {
            return Err("ALLOW FILTERING is not supported by the CQL test server".into());
        }
        Ok(Statement::Select {
            selectors,
            table,
            relations,
            order_desc,
            limit,
        })
    }

    fn operator(&mut self) -> Result<Op, SyntaxError> {
        Ok(match self.next()? {
            Token::Sym("=") => Op::Eq,
            Token::Sym("!=") => Op::Neq,
            Token::Sym("<") => Op::Lt,
            Token::Sym("<=") => Op::Lte,
            Token::Sym(">") => Op::Gt,
            Token::Sym(">=") => Op::Gte,
            other => return Err(format!("expected an operator, found {other:?}")),
        })
    }

    pub(super) fn term_list(&mut self) -> Result<Vec<Term>, SyntaxError> {
        self.sym("(")?;
        let mut terms = vec![self.term()?];
        while self.eat_sym(",") {
            terms.push(self.term()?);
        }
        self.sym(")")?;
        Ok(terms)
    }

    fn relations(&mut self) -> Result<Vec<Relation>, SyntaxError> {
        let mut out = Vec::new();
        loop {
            let column = self.ident()?;
            let relation = if self.eat_kw("in") {
                Relation {
                    column,
                    op: Op::Eq,
                    terms: self.term_list()?,
                    is_in: true,
                }
            } else {
                let op = self.operator()?;
                if op == Op::Neq {
                    return Err("Unsupported \"!=\" relation".into());
                }
                Relation {
                    column,
                    op,
                    terms: vec![self.term()?],
                    is_in: false,
                }
            };
            out.push(relation);
            if !self.eat_kw("and") {
                return Ok(out);
            }
        }
    }

    fn using(&mut self) -> Result<Using, SyntaxError> {
        let mut using = Using::default();
        if !self.eat_kw("using") {
            return Ok(using);
        }
        loop {
            if self.eat_kw("ttl") {
                using.ttl = Some(self.term()?);
            } else if self.eat_kw("timestamp") {
                using.timestamp = Some(self.term()?);
            } else {
                return Err(format!("expected TTL or TIMESTAMP at {:?}", self.peek()));
            }
            if !self.eat_kw("and") {
                return Ok(using);
            }
        }
    }

    fn conditions(&mut self) -> Result<Conditions, SyntaxError> {
        if !self.eat_kw("if") {
            return Ok(Conditions::None);
        }
        if self.eat_kw("exists") {
            return Ok(Conditions::Exists);
        }
        if self.eat_kw("not") {
            self.kw("exists")?;
            return Ok(Conditions::NotExists);
        }
        let mut out = Vec::new();
        loop {
            let col = self.ident()?;
            if self.eat_kw("in") {
                out.push(Condition::In(col, self.term_list()?));
            } else {
                let op = self.operator()?;
                out.push(Condition::Compare(col, op, self.term()?));
            }
            if !self.eat_kw("and") {
                return Ok(Conditions::Columns(out));
            }
        }
    }

    fn update(&mut self) -> Result<Statement, SyntaxError> {
        let table = self.table_ref()?;
        let using = self.using()?;
        self.kw("set")?;
        let mut assignments = Vec::new();
        loop {
            let col = self.ident()?;
            self.sym("=")?;
            assignments.push((col, self.term()?));
            if !self.eat_sym(",") {
                break;
            }
        }
        self.kw("where")?;
        let relations = self.relations()?;
        let conditions = self.conditions()?;
        Ok(Statement::Update {
            table,
            using,
            assignments,
            relations,
            conditions,
        })
    }

    fn insert(&mut self) -> Result<Statement, SyntaxError> {
        self.kw("into")?;
        let table = self.table_ref()?;
        self.sym("(")?;
        let mut columns = vec![self.ident()?];
        while self.eat_sym(",") {
            columns.push(self.ident()?);
        }
        self.sym(")")?;
        self.kw("values")?;
        self.sym("(")?;
        let mut terms = vec![self.term()?];
        while self.eat_sym(",") {
            terms.push(self.term()?);
        }
        self.sym(")")?;
        if columns.len() != terms.len() {
            return Err("unmatched column names/values".into());
        }
        let conditions = match self.conditions()? {
            c @ (Conditions::None | Conditions::NotExists) => c,
            _ => return Err("INSERT only takes IF NOT EXISTS".into()),
        };
        let using = self.using()?;
        Ok(Statement::Insert {
            table,
            assignments: columns.into_iter().zip(terms).collect(),
            using,
            conditions,
        })
    }

    fn delete(&mut self) -> Result<Statement, SyntaxError> {
        let mut columns = Vec::new();
        if !self.peek().is_some_and(|t| t.is_kw("from")) {
            loop {
                columns.push(self.ident()?);
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        self.kw("from")?;
        let table = self.table_ref()?;
        let using = self.using()?;
        if using.ttl.is_some() {
            return Err("DELETE does not take a TTL".into());
        }
        self.kw("where")?;
        let relations = self.relations()?;
        let conditions = self.conditions()?;
        Ok(Statement::Delete {
            columns,
            table,
            using,
            relations,
            conditions,
        })
    }
}

#[cfg(test)]
#[path = "parser_tests.rs"]
mod tests;
