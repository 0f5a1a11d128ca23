//! Property: the validator accepts a random dependency graph exactly when it is acyclic
//! (computed here independently), orders accepted graphs topologically, and names a real
//! cycle of the graph when it rejects one.

use proptest::prelude::*;
use workflow_spec::graph::topological_order;
use workflow_spec::parse::parse_str;

/// A random graph: `edges[i]` lists the steps `i` depends on (no duplicates; self-loops
/// allowed), each edge written either as an action argument or in `depends_on`.
#[derive(Debug, Clone)]
struct Graph {
    edges: Vec<Vec<(usize, bool)>>,
}

fn graph() -> impl Strategy<Value = Graph> {
    (1usize..9).prop_flat_map(|n| {
        let row = proptest::collection::vec((proptest::bool::weighted(0.2), any::<bool>()), n);
        proptest::collection::vec(row, n).prop_map(|rows| Graph {
            edges: rows
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .enumerate()
                        .filter(|(_, (present, _))| *present)
                        .map(|(dep, (_, as_argument))| (dep, as_argument))
                        .collect()
                })
                .collect(),
        })
    })
}

impl Graph {
    fn deps(&self, step: usize) -> impl Iterator<Item = usize> + '_ {
        self.edges[step].iter().map(|(dep, _)| *dep)
    }

    /// `workflow W() { step s0 -> () { action: f(..), depends_on: [..] } ... }`.
    fn render(&self) -> String {
        let mut source = String::from("workflow W() {\n");
        for (step, edges) in self.edges.iter().enumerate() {
            let name = |(dep, _): &(usize, bool)| format!("s{dep}");
            let args: Vec<String> = edges.iter().filter(|(_, arg)| *arg).map(name).collect();
            let listed: Vec<String> = edges.iter().filter(|(_, arg)| !*arg).map(name).collect();
            source.push_str(&format!(
                "    step s{step} -> () {{ action: f({}), ",
                args.join(", ")
            ));
            if !listed.is_empty() {
                source.push_str(&format!("depends_on: [{}], ", listed.join(", ")));
            }
            source.push_str("}\n");
        }
        source.push('}');
        source
    }

    /// Acyclicity by repeatedly removing steps with no remaining dependency (Kahn),
    /// written here independently of the crate's graph module.
    fn is_acyclic(&self) -> bool {
        let n = self.edges.len();
        let mut removed = vec![false; n];
        loop {
            let ready =
                (0..n).find(|&step| !removed[step] && self.deps(step).all(|dep| removed[dep]));
            match ready {
                Some(step) => removed[step] = true,
                None => return removed.iter().all(|r| *r),
            }
        }
    }

    fn has_edge(&self, step: usize, dep: usize) -> bool {
        self.deps(step).any(|d| d == dep)
    }
}

fn step_index(name: &str) -> usize {
    name.trim()
        .strip_prefix('s')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a step name: {name:?}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn accepts_exactly_the_acyclic_graphs(graph in graph()) {
        let source = graph.render();
        let parsed = parse_str(&source);
        let messages: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
        prop_assert_eq!(
            parsed.errors.is_empty(),
            graph.is_acyclic(),
            "source:\n{}\nerrors: {:#?}", source, messages
        );
        match parsed.spec {
            Some(spec) => {
                // The model keeps every edge, and the order respects each of them.
                let deps: Vec<Vec<usize>> = spec.steps.iter().map(|s| s.deps.clone()).collect();
                for (step, list) in deps.iter().enumerate() {
                    let mut got = list.clone();
                    let mut want: Vec<usize> = graph.deps(step).collect();
                    got.sort_unstable();
                    want.sort_unstable();
                    prop_assert_eq!(got, want, "deps of s{}", step);
                }
                let order = topological_order(&deps);
                prop_assert!(order.is_ok(), "{:?}", order);
                let order = order.unwrap_or_default();
                let mut position = vec![usize::MAX; deps.len()];
                for (at, step) in order.iter().enumerate() {
                    prop_assert_eq!(position[*step], usize::MAX, "s{} twice in {:?}", step, order);
                    position[*step] = at;
                }
                prop_assert!(position.iter().all(|p| *p != usize::MAX), "{:?}", order);
                for (step, list) in deps.iter().enumerate() {
                    for dep in list {
                        prop_assert!(position[*dep] < position[step], "s{} before s{}", dep, step);
                    }
                }
            }
            None => {
                // Rejected: a self-loop is reported as such; any other cycle is spelled
                // `a -> b -> ... -> a`, each arrow an edge of the graph (b depends on a).
                let self_loop = (0..graph.edges.len()).any(|s| graph.has_edge(s, s));
                let cycle = messages.iter().find_map(|m| {
                    m.strip_prefix("dependency cycle: ")
                        .and_then(|rest| rest.lines().next())
                        .map(str::to_owned)
                });
                prop_assert!(
                    self_loop || cycle.is_some(),
                    "no cycle named:\n{}\n{:#?}", source, messages
                );
                for message in &messages {
                    prop_assert!(
                        message.starts_with("dependency cycle: ")
                            || message.contains("cannot depend on itself")
                            || message.contains("cannot take its own output"),
                        "unexpected error {:?} for\n{}", message, source
                    );
                }
                if let Some(cycle) = cycle {
                    let path: Vec<usize> = cycle.split(" -> ").map(step_index).collect();
                    prop_assert!(path.len() >= 3, "{}", cycle);
                    prop_assert_eq!(path.first(), path.last());
                    for pair in path.windows(2) {
                        prop_assert!(
                            graph.has_edge(pair[1], pair[0]),
                            "s{} does not depend on s{} in {}", pair[1], pair[0], cycle
                        );
                    }
                }
            }
        }
    }
}
