//! Parsing `CREATE KEYSPACE` and `CREATE TABLE`, with their types and option maps.

use super::ast::{Statement, Term};
use super::lexer::Token;
use super::parser::{Parser, SyntaxError};
use super::values::CqlType;

impl Parser {
    pub(super) fn create(&mut self) -> Result<Statement, SyntaxError> {
        let is_keyspace = self.eat_kw("keyspace");
        if !is_keyspace {
            self.kw("table")?;
        }
        let if_not_exists = if self.eat_kw("if") {
            self.kw("not")?;
            self.kw("exists")?;
            true
        } else {
            false
        };
        if is_keyspace {
            let name = self.ident()?;
            self.kw("with")?;
            self.kw("replication")?;
            self.sym("=")?;
            let replication = self.map_literal()?;
            let mut tablets = None;
            while self.eat_kw("and") {
                if self.eat_kw("durable_writes") {
                    self.sym("=")?;
                    self.term()?;
                } else if self.eat_kw("tablets") {
                    self.sym("=")?;
                    for (k, v) in self.map_literal()? {
                        match (k.as_str(), v.as_str()) {
                            ("enabled", "true") => tablets = Some(true),
                            ("enabled", "false") => tablets = Some(false),
                            ("initial", _) => tablets = Some(true),
                            _ => return Err(format!("unknown tablets option {k}")),
                        }
                    }
                } else {
                    return Err(format!("unknown keyspace property at {:?}", self.peek()));
                }
            }
            return Ok(Statement::CreateKeyspace {
                name,
                if_not_exists,
                replication,
                tablets,
            });
        }
        let table = self.table_ref()?;
        self.sym("(")?;
        let mut columns = Vec::new();
        let mut statics = Vec::new();
        let mut key: Vec<String> = Vec::new();
        loop {
            if self.eat_kw("primary") {
                self.kw("key")?;
                self.sym("(")?;
                if self.eat_sym("(") {
                    key.push(self.ident()?);
                    if !self.eat_sym(")") {
                        return Err("composite partition keys are not supported".into());
                    }
                } else {
                    key.push(self.ident()?);
                }
                while self.eat_sym(",") {
                    key.push(self.ident()?);
                }
                self.sym(")")?;
            } else {
                let name = self.ident()?;
                columns.push((name.clone(), self.cql_type()?));
                if self.eat_kw("static") {
                    statics.push(name.clone());
                }
                if self.eat_kw("primary") {
                    self.kw("key")?;
                    key = vec![name];
                }
            }
            if !self.eat_sym(",") {
                break;
            }
        }
        self.sym(")")?;
        let mut default_ttl = 0;
        let mut gc_grace = None;
        let mut order: Vec<(String, bool)> = Vec::new();
        if self.eat_kw("with") {
            loop {
                if self.eat_kw("clustering") {
                    self.kw("order")?;
                    self.kw("by")?;
                    self.sym("(")?;
                    loop {
                        let col = self.ident()?;
                        let desc = self.eat_kw("desc");
                        if !desc {
                            self.eat_kw("asc");
                        }
                        order.push((col, desc));
                        if !self.eat_sym(",") {
                            break;
                        }
                    }
                    self.sym(")")?;
                } else {
                    let option = self.ident()?;
                    self.sym("=")?;
                    match (option.as_str(), self.term()?) {
                        ("default_time_to_live", Term::Num(n)) => {
                            default_ttl = n.parse().map_err(|_| "bad default_time_to_live")?;
                        }
                        ("gc_grace_seconds", Term::Num(n)) => {
                            gc_grace = Some(n.parse().map_err(|_| "bad gc_grace_seconds")?);
                        }
                        (other, _) => return Err(format!("unsupported table option {other}")),
                    }
                }
                if !self.eat_kw("and") {
                    break;
                }
            }
        }
        let mut key = key.into_iter();
        let partition_key = key.next().ok_or("no PRIMARY KEY")?;
        let clustering: Vec<(String, bool)> = key.map(|c| (c, false)).collect();
        let mut clustering = clustering;
        for (i, (col, desc)) in order.into_iter().enumerate() {
            match clustering.get_mut(i) {
                Some(c) if c.0 == col => c.1 = desc,
                _ => {
                    return Err(format!(
                        "CLUSTERING ORDER BY must list the clustering columns in order ({col})"
                    ));
                }
            }
        }
        Ok(Statement::CreateTable {
            table,
            if_not_exists,
            columns,
            partition_key,
            clustering,
            statics,
            default_ttl,
            gc_grace,
        })
    }

    fn cql_type(&mut self) -> Result<CqlType, SyntaxError> {
        let name = match self.next()? {
            Token::Ident { name, .. } => name,
            other => return Err(format!("expected a type, found {other:?}")),
        };
        let mut params = Vec::new();
        if self.eat_sym("<") {
            loop {
                params.push(self.cql_type()?);
                if !self.eat_sym(",") {
                    break;
                }
            }
            self.sym(">")?;
        }
        CqlType::from_name(&name, params)
    }

    fn map_literal(&mut self) -> Result<Vec<(String, String)>, SyntaxError> {
        self.sym("{")?;
        let mut out = Vec::new();
        loop {
            let key = match self.next()? {
                Token::Str(s) => s,
                other => return Err(format!("expected a string key, found {other:?}")),
            };
            self.sym(":")?;
            let value = match self.next()? {
                Token::Str(s) | Token::Num(s) => s,
                t if t.is_kw("true") => "true".into(),
                t if t.is_kw("false") => "false".into(),
                other => return Err(format!("expected a value, found {other:?}")),
            };
            out.push((key, value));
            if !self.eat_sym(",") {
                break;
            }
        }
        self.sym("}")?;
        Ok(out)
    }
}
