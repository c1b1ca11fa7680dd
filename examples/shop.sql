-- The example shop database (examples/shop.db is built from this file:
-- `sqlite3 examples/shop.db < examples/shop.sql`). Made up for planrt's examples.
CREATE TABLE stores (
    id     INTEGER PRIMARY KEY,
    name   TEXT NOT NULL,
    city   TEXT NOT NULL,
    opened TEXT NOT NULL            -- ISO date
);
CREATE TABLE staff (
    id       INTEGER PRIMARY KEY,
    name     TEXT NOT NULL,
    store_id INTEGER NOT NULL REFERENCES stores(id),
    role     TEXT NOT NULL,         -- 'manager' or 'sales'
    salary   INTEGER NOT NULL       -- yearly, EUR: denied to plans by examples/sql.toml
);
CREATE TABLE customers (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT NOT NULL
);
CREATE TABLE products (
    id       INTEGER PRIMARY KEY,
    name     TEXT NOT NULL,
    category TEXT NOT NULL,
    price    REAL NOT NULL          -- EUR
);
CREATE TABLE orders (
    id          INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    staff_id    INTEGER NOT NULL REFERENCES staff(id),
    product_id  INTEGER NOT NULL REFERENCES products(id),
    quantity    INTEGER NOT NULL,
    ordered_at  TEXT NOT NULL       -- ISO date
);

INSERT INTO stores VALUES
 (1, 'Alexanderplatz', 'Berlin', '2019-03-01'),
 (2, 'Le Marais', 'Paris', '2020-06-15'),
 (3, 'Navigli', 'Milan', '2022-09-01');
INSERT INTO staff VALUES
 (1, 'Alice Chen', 1, 'manager', 72000),
 (2, 'Bruno Keller', 1, 'sales', 41000),
 (3, 'Chloé Martin', 2, 'manager', 70000),
 (4, 'David Roux', 2, 'sales', 39000),
 (5, 'Elena Bianchi', 3, 'sales', 40000),
 (6, 'Farid Haddad', 3, 'manager', 68000);
INSERT INTO customers VALUES
 (1, 'Greta Vogel', 'Berlin'), (2, 'Hugo Laurent', 'Paris'), (3, 'Ines Costa', 'Milan'),
 (4, 'Jonas Weber', 'Berlin'), (5, 'Karim Benali', 'Paris'), (6, 'Lucia Romano', 'Milan');
INSERT INTO products VALUES
 (1, 'Espresso machine', 'kitchen', 349.0),
 (2, 'Grinder', 'kitchen', 129.0),
 (3, 'Kettle', 'kitchen', 59.0),
 (4, 'Desk lamp', 'home', 45.0),
 (5, 'Armchair', 'home', 480.0);
INSERT INTO orders VALUES
 (1, 1, 2, 1, 1, '2023-11-20'),
 (2, 4, 2, 2, 2, '2024-01-12'),
 (3, 1, 1, 5, 1, '2024-02-03'),
 (4, 2, 4, 1, 2, '2024-02-28'),
 (5, 5, 4, 3, 3, '2024-03-14'),
 (6, 3, 5, 5, 2, '2024-04-02'),
 (7, 6, 5, 1, 1, '2024-05-19'),
 (8, 2, 3, 4, 4, '2024-06-07'),
 (9, 4, 2, 5, 2, '2024-07-21'),
 (10, 5, 4, 2, 1, '2024-08-30'),
 (11, 3, 6, 3, 2, '2024-09-11'),
 (12, 1, 2, 1, 1, '2024-10-05'),
 (13, 6, 5, 2, 3, '2024-11-16'),
 (14, 2, 4, 5, 1, '2024-12-09'),
 (15, 4, 1, 4, 2, '2025-01-08');
