#!/usr/bin/env python3
"""Scores the importer against independent parsers on their own public sample files.

Each file of a corpus is imported into a running reference server (a new user per file) and the
accounts it makes (transaction count and sum per account) are compared with what an independent
parser reads from the same file: quiffen for QIF, csv2ofx's expected outputs for CSV, mt-940 for
MT940/MT942, pycamt for CAMT. A file scores when the accounts agree, or when the totals agree
and only the split into accounts differs; INVERTED marks a sum with the opposite sign.

The corpora are not in this repository: clone them into one folder first (quiffen, csv2ofx,
mt940 (WoLpH/mt940), pycamt), then

    pip install quiffen csv2ofx mt-940 pycamt
    AGG_RATE_LIMITS=off AGG_BIND=127.0.0.1:18080 cargo run -p aggregation-examples --bin aggregation-server &
    python3 benches/fidelity/score.py --corpus /path/to/corpora --outbox data/outbox [filter …]
"""
import argparse, glob, itertools, json, os, pathlib, re, time, urllib.error, urllib.request, uuid
from decimal import Decimal


def qif_expect(path):
    import quiffen
    q = quiffen.Qif.parse(str(path), day_first=False)
    accs = []
    for acc in q.accounts.values():
        for txs in acc.transactions.values():
            if not txs:
                continue
            if any(x.amount is None for x in txs):
                accs.append([len(txs), '?'])  # the parser gives no amount (investment actions)
            else:
                accs.append([len(txs), str(sum(x.amount for x in txs))])
    return accs


def ofx_expect(text):
    accs = []
    for stmt in re.split(r'<STMTRS>|<CCSTMTRS>', text)[1:]:
        amts = re.findall(r'<TRNAMT>\s*([-+0-9.,]+)', stmt)
        accs.append([len(amts), str(sum(Decimal(a) for a in amts))])
    return accs


def mt940_expect(path):
    import mt940
    ts = mt940.parse(str(path))
    accs = {}
    for t in ts:
        acct = t.data.get('account_identification') or ts.data.get('account_identification')
        entry = accs.setdefault(acct, [0, Decimal(0)])
        entry[0] += 1
        entry[1] += Decimal(str(t.data['amount'].amount))
    return [[c, str(s)] for c, s in accs.values()]


def camt_expect(xml):
    from pycamt.parser import Camt053Parser
    accs = {}
    for t in Camt053Parser(xml).get_transactions():
        amount = Decimal(t['Amount'])
        amount = amount if t['CreditDebitIndicator'] == 'CRDT' else -amount
        entry = accs.setdefault(t.get('AccountIBAN'), [0, Decimal(0)])
        entry[0] += 1
        entry[1] += amount
    return [[c, str(s)] for c, s in accs.values()]


def expectations(corpus, scratch):
    out = {}
    def attempt(path, fmt, fn, *args):
        try:
            out[str(path)] = {'format': fmt, 'accounts': fn(*args)}
        except Exception as e:  # the independent parser refuses the file: not scored
            out[str(path)] = {'format': fmt, 'error': repr(e)}
    for p in sorted((corpus / 'quiffen/tests/test_files').glob('*.qif')):
        attempt(p, 'qif', qif_expect, p)
    for p in sorted((corpus / 'csv2ofx/data/converted').glob('*.qif')):
        attempt(p, 'qif', qif_expect, p)
    # csv2ofx's own test table pairs each CSV with the output its mapping gives.
    src = (corpus / 'csv2ofx/tests/test_cli.py').read_text()
    pairs = {}
    for m in re.finditer(r'["\']([\w.-]+\.csv)["\'],\s*["\']([\w.-]+\.(?:ofx|qif))["\']', src):
        pairs.setdefault(m.group(1), m.group(2))
    for name, converted in pairs.items():
        cp = corpus / 'csv2ofx/data/converted' / converted
        fn = ofx_expect if converted.endswith('.ofx') else qif_expect
        arg = cp.read_text(errors='replace') if converted.endswith('.ofx') else cp
        attempt(corpus / 'csv2ofx/data/test' / name, 'csv', fn, arg)
    # Its mappings filter rows by choices the files do not carry (the amazon test excludes a
    # card, mint_extra keeps amounts below 2500): the expectation is the unfiltered reading.
    for name, accs in (('amazon.csv', [[3, '-45.76']]), ('mint_extra.csv', [[4, '-3000.00']])):
        key = str(corpus / 'csv2ofx/data/test' / name)
        if key in out:
            out[key]['accounts'] = accs
    for p in sorted(glob.glob(str(corpus / 'mt940/mt940_tests/**/*.sta'), recursive=True)):
        attempt(p, 'mt942' if 'mt942' in p else 'mt940', mt940_expect, p)
    # pycamt keeps its samples inline in its tests.
    n = 0
    for f in sorted((corpus / 'pycamt/tests').glob('*.py')):
        for m in re.finditer(r'"""(\s*(?:<\?xml[^>]*>\s*)?<Document.*?</Document>\s*)"""', f.read_text(), re.S):
            n += 1
            p = scratch / f'pycamt_{n}.xml'
            p.write_text(m.group(1).strip())
            attempt(p, 'camt.053', camt_expect, m.group(1).strip())
    return out


class Server:
    def __init__(self, base, outbox):
        self.base, self.outbox = base, outbox

    def req(self, method, path, body=None, token=None, ctype='application/json'):
        headers = {}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers['content-type'] = ctype
        if token:
            headers['authorization'] = 'Bearer ' + token
        r = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(r) as resp:
                return resp.status, json.loads(resp.read() or b'null')
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text.decode(errors='replace')

    def new_user(self):
        email = f'u{uuid.uuid4().hex[:10]}@example.com'
        password = 'Corr3ct-Horse!x'
        status, _ = self.req('POST', '/api/v1/users', {'email': email, 'password': password})
        assert status == 201, status
        token = None
        for _ in range(100):
            for f in sorted(glob.glob(self.outbox + '/*.eml'), key=os.path.getmtime, reverse=True)[:20]:
                text = open(f, errors='replace').read()
                if email in text:
                    token = re.findall(r'[0-9a-f]{64}', text)[-1]
                    break
            if token:
                break
            time.sleep(0.05)
        self.req('POST', '/api/v1/email-verifications', {'token': token})
        _, body = self.req('POST', '/api/v1/sessions', {'email': email, 'password': password})
        return body['access_token']

    def accounts_of(self, path, fmt):
        token = self.new_user()
        boundary = uuid.uuid4().hex
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                 for k, v in (('account_name', 'Scored'), ('format', fmt))]
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{os.path.basename(path)}"\r\n\r\n'.encode()
                     + open(path, 'rb').read() + b'\r\n')
        parts.append(f'--{boundary}--\r\n'.encode())
        status, body = self.req('POST', '/api/v1/imports', b''.join(parts), token,
                                'multipart/form-data; boundary=' + boundary)
        if status != 201:
            return status, body, None
        _, listing = self.req('GET', '/api/v1/accounts?limit=100', token=token)
        result = []
        for account in listing['accounts']:
            rows, offset = [], 0
            while True:
                _, page = self.req('GET', f"/api/v1/accounts/{account['id']}/transactions?limit=100&offset={offset}", token=token)
                data = page.get('transactions', [])
                rows += data
                if len(data) < 100:
                    break
                offset += 100
            result.append([len(rows), str(sum(Decimal(str(t['amount'])) for t in rows))])
        return status, body, result


def norm(accs):
    return sorted(([c, s if s == '?' else str(Decimal(s).normalize())] for c, s in accs if c > 0),
                  key=lambda a: (a[0], a[1]))


def same(got, want):
    return len(got) == len(want) and any(
        all(a[0] == b[0] and (b[1] == '?' or a[1] == b[1]) for a, b in zip(perm, want))
        for perm in itertools.permutations(got))


def total(accs):
    return [sum(c for c, _ in accs), str(sum(Decimal(s) for _, s in accs if s != '?').normalize())]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--corpus', required=True, type=pathlib.Path)
    parser.add_argument('--base', default='http://127.0.0.1:18080')
    parser.add_argument('--outbox', default='data/outbox')
    parser.add_argument('filters', nargs='*')
    args = parser.parse_args()
    scratch = pathlib.Path(os.environ.get('TMPDIR', '/tmp')) / 'fidelity-camt'
    scratch.mkdir(exist_ok=True)
    server = Server(args.base, args.outbox)
    rows = []
    for path, e in expectations(args.corpus, scratch).items():
        if args.filters and not any(f in path for f in args.filters):
            continue
        if 'error' in e or not any(c for c, _ in e['accounts']):
            continue
        status, body, got = server.accounts_of(path, e['format'])
        want = norm(e['accounts'])
        if got is None:
            verdict, detail = 'REFUSED', body
        else:
            g = norm(got)
            if same(g, want):
                verdict = 'OK'
            elif total(g) == total(want):
                verdict = 'OK-TOTAL'
            elif total(g)[0] == total(want)[0] and Decimal(total(g)[1]) == -Decimal(total(want)[1]):
                verdict = 'INVERTED'
            else:
                verdict = 'DIFF'
            detail = {'got': g, 'want': want, 'warnings': [w.get('message') for w in body.get('warnings', [])]}
        name = os.path.relpath(path, args.corpus) if str(path).startswith(str(args.corpus)) else path
        rows.append((e['format'], verdict))
        print(e['format'], verdict, name, json.dumps(detail)[:300], flush=True)
    for fmt in sorted({r[0] for r in rows}):
        rs = [r for r in rows if r[0] == fmt]
        ok = sum(1 for r in rs if r[1] in ('OK', 'OK-TOTAL'))
        inverted = sum(1 for r in rs if r[1] == 'INVERTED')
        print(f'{fmt}: {ok}/{len(rs)} ({100 * ok / len(rs):.0f} %), inverted {inverted}')


if __name__ == '__main__':
    main()
