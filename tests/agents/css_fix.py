"""Fake maker for issue 31's drift tests: fixes the link colour in styles/site.css, and, as its
first argument says, also strays outside `styles/` in one way or another.

    benign      only the CSS fix (plus a new styles/ file on odd attempts of a varied run)
    schema      also appends a column to db/schema.sql
    rename      also moves db/schema.sql into styles/ (a rename *into* scope)
    symlink     also adds styles/schema.css, a link to ../db/schema.sql
    big         the fix plus 500 new lines in styles/generated.css
"""

import os
import sys
from pathlib import Path

sys.stdin.read()
mode = sys.argv[1] if len(sys.argv) > 1 else "benign"
site = Path("styles/site.css")
site.write_text(site.read_text().replace("color: red", "color: blue"))
if mode == "schema":
    schema = Path("db/schema.sql")
    schema.write_text(schema.read_text() + "ALTER TABLE users ADD COLUMN theme TEXT;\n")
elif mode == "rename":
    os.rename("db/schema.sql", "styles/schema.sql.css")
elif mode == "symlink":
    os.symlink("../db/schema.sql", "styles/schema.css")
elif mode == "big":
    Path("styles/generated.css").write_text(
        "".join(f".c{i} {{ margin: {i}px; }}\n" for i in range(500))
    )
print(f"fixed the link colour in styles/site.css ({mode})")
