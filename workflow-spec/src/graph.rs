//! Graph algorithms over step dependencies: topological order and cycle finding.

/// The steps in an order that respects every dependency, or the first cycle found.
///
/// `deps[i]` lists the steps `i` depends on. Among ready steps, the earliest declared comes
/// first, so the order is stable. Runs in O(V + E).
pub fn topological_order(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = deps.len();
    let mut indegree = vec![0usize; n];
    let mut dependents = vec![Vec::new(); n];
    for (step, list) in deps.iter().enumerate() {
        for &dep in list {
            if dep < n {
                indegree[step] += 1;
                dependents[dep].push(step);
            }
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = indegree
        .iter()
        .enumerate()
        .filter(|(_, degree)| **degree == 0)
        .map(|(step, _)| std::cmp::Reverse(step))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(step)) = ready.pop() {
        order.push(step);
        for &next in &dependents[step] {
            indegree[next] -= 1;
            if indegree[next] == 0 {
                ready.push(std::cmp::Reverse(next));
            }
        }
    }
    if order.len() == n {
        Ok(order)
    } else {
        Err(find_cycle(deps).unwrap_or_default())
    }
}

/// One dependency cycle, as the steps along it: `[a, b, c]` means a depends on b, b on c
/// and c on a. `None` when the graph is acyclic.
pub fn find_cycle(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let n = deps.len();
    let mut mark = vec![Mark::New; n];
    for root in 0..n {
        if mark[root] != Mark::New {
            continue;
        }
        // Iterative depth-first search: (node, next edge index).
        let mut stack = vec![(root, 0usize)];
        mark[root] = Mark::Open;
        while let Some(&mut (node, ref mut edge)) = stack.last_mut() {
            if let Some(&next) = deps[node].get(*edge) {
                *edge += 1;
                if next >= n {
                    continue;
                }
                match mark[next] {
                    Mark::New => {
                        mark[next] = Mark::Open;
                        stack.push((next, 0));
                    }
                    Mark::Open => {
                        let start = stack.iter().position(|(s, _)| *s == next).unwrap_or(0);
                        return Some(stack[start..].iter().map(|(s, _)| *s).collect());
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_a_diamond() {
        let deps = vec![vec![], vec![0], vec![0], vec![1, 2]];
        assert_eq!(topological_order(&deps), Ok(vec![0, 1, 2, 3]));
    }

    #[test]
    fn finds_the_cycle_path() {
        let deps = vec![vec![2], vec![0], vec![1], vec![]];
        let cycle = topological_order(&deps).unwrap_err();
        assert_eq!(cycle.len(), 3);
        for (i, step) in cycle.iter().enumerate() {
            let next = cycle[(i + 1) % cycle.len()];
            assert!(deps[*step].contains(&next));
        }
    }

    #[test]
    fn self_loops_are_cycles() {
        assert_eq!(find_cycle(&[vec![0]]), Some(vec![0]));
    }
}
