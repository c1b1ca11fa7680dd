#!/usr/bin/env python3
# A synthetic 800-table SQLite database for timing `planvm ground` as a process (not for
# its accuracy: the names are random): table and column names from a word list, a
# foreign key from each table to an earlier one, five rows each (36,610 sampled values).
# Deterministic (seeded). Usage: scripts/grounding-schema.py OUT.db (BENCHMARKS.md).
import random, sqlite3, sys
random.seed(7)
words = """customer orders item product invoice payment shipment warehouse supplier employee
department region country city store account transaction ledger budget forecast campaign
channel session event click page visit user device browser license contract vendor asset
ticket incident service plan subscription usage metric sensor reading station route trip
vehicle driver fare zone stop schedule course student teacher grade exam school library
book author loan member patient doctor visit diagnosis drug prescription claim policy""".split()
db = sqlite3.connect(sys.argv[1])
names = set()
while len(names) < 800:
    names.add("_".join(random.sample(words, random.choice([1, 2, 3]))) + ("_" + str(random.randint(2000, 2024)) if random.random() < 0.2 else ""))
names = sorted(names)
for i, t in enumerate(names):
    cols = ["id INTEGER PRIMARY KEY"]
    for j in range(random.randint(4, 14)):
        w = random.choice(words)
        cols.append(f"\"{w}_{random.choice(['name','code','amount','date','count','type','status'])}_{j}\" TEXT")
    if i > 0:
        p = names[random.randrange(i)]
        cols.append(f"{p}_id INTEGER REFERENCES \"{p}\"(id)")
    db.execute(f"CREATE TABLE \"{t}\" ({', '.join(cols)})")
    ncols = len(cols)
    for r in range(5):
        db.execute(f"INSERT INTO \"{t}\" VALUES ({', '.join(['?'] * ncols)})",
                   [r] + [f"{random.choice(words)} {r}" for _ in range(ncols - 1 - (1 if i > 0 else 0))] + ([r] if i > 0 else []))
db.commit()
print(len(names), "tables")
