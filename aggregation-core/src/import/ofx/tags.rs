//! The OFX element names the reader knows.
//!
//! Knowing whether a name is an aggregate or a leaf lets the SGML reader close unclosed leaf
//! elements even when their value is empty (`<MEMO>` directly followed by `<NAME>`), and keeps a
//! known aggregate from ever being taken for a leaf. Names are matched case-insensitively.
//! A few aggregates that some institutions write as leaves (`<PAYEE>Name`, `<CURRENCY>EUR`)
//! are neither, and like every other name ([`Tag::Other`]) are classified by their content
//! (see [`super::sgml`]).

macro_rules! tags {
    (
        aggregates { $($agg:ident = $agg_name:literal,)* }
        flexible { $($flex:ident = $flex_name:literal,)* }
        leaves { $($leaf:ident = $leaf_name:literal,)* }
    ) => {
        /// A known OFX element name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum Tag {
            $($agg,)*
            $($flex,)*
            $($leaf,)*
            /// Any name not listed (proprietary `INTU.*` tags, aggregates the reader skips, …).
            Other,
        }

        impl Tag {
            /// The tag for an element name (any case).
            pub(crate) fn from_name(name: &[u8]) -> Tag {
                let mut buf = [0u8; 24];
                let Some(upper) = buf.get_mut(..name.len()) else {
                    return Tag::Other;
                };
                upper.copy_from_slice(name);
                upper.make_ascii_uppercase();
                match &*upper {
                    $($agg_name => Tag::$agg,)*
                    $($flex_name => Tag::$flex,)*
                    $($leaf_name => Tag::$leaf,)*
                    _ => Tag::Other,
                }
            }

            /// Whether this element always has child elements (never a value).
            pub(crate) fn is_aggregate(self) -> bool {
                matches!(self, $(Tag::$agg)|*)
            }

            /// Whether this element always has a value (never children).
            pub(crate) fn is_leaf(self) -> bool {
                matches!(self, $(Tag::$leaf)|*)
            }

            /// The element name in upper case (empty for [`Tag::Other`]).
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Tag::$agg => as_str($agg_name),)*
                    $(Tag::$flex => as_str($flex_name),)*
                    $(Tag::$leaf => as_str($leaf_name),)*
                    Tag::Other => "",
                }
            }
        }
    };
}

const fn as_str(bytes: &'static [u8]) -> &'static str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => "",
    }
}

tags! {
    aggregates {
        Ofx = b"OFX",
        SignonMsgs = b"SIGNONMSGSRSV1",
        Sonrs = b"SONRS",
        Status = b"STATUS",
        Fi = b"FI",
        BankMsgs = b"BANKMSGSRSV1",
        CcMsgs = b"CREDITCARDMSGSRSV1",
        InvMsgs = b"INVSTMTMSGSRSV1",
        SecListMsgs = b"SECLISTMSGSRSV1",
        StmtTrnRs = b"STMTTRNRS",
        CcStmtTrnRs = b"CCSTMTTRNRS",
        InvStmtTrnRs = b"INVSTMTTRNRS",
        StmtRs = b"STMTRS",
        CcStmtRs = b"CCSTMTRS",
        InvStmtRs = b"INVSTMTRS",
        BankAcctFrom = b"BANKACCTFROM",
        CcAcctFrom = b"CCACCTFROM",
        InvAcctFrom = b"INVACCTFROM",
        BankAcctTo = b"BANKACCTTO",
        CcAcctTo = b"CCACCTTO",
        BankTranList = b"BANKTRANLIST",
        StmtTrn = b"STMTTRN",
        LedgerBal = b"LEDGERBAL",
        AvailBal = b"AVAILBAL",
        BalList = b"BALLIST",
        Bal = b"BAL",
        InvTranList = b"INVTRANLIST",
        InvBankTran = b"INVBANKTRAN",
        BuyStock = b"BUYSTOCK",
        BuyMf = b"BUYMF",
        BuyDebt = b"BUYDEBT",
        BuyOpt = b"BUYOPT",
        BuyOther = b"BUYOTHER",
        SellStock = b"SELLSTOCK",
        SellMf = b"SELLMF",
        SellDebt = b"SELLDEBT",
        SellOpt = b"SELLOPT",
        SellOther = b"SELLOTHER",
        Income = b"INCOME",
        Reinvest = b"REINVEST",
        Transfer = b"TRANSFER",
        InvBuy = b"INVBUY",
        InvSell = b"INVSELL",
        InvTran = b"INVTRAN",
        SecId = b"SECID",
        InvPosList = b"INVPOSLIST",
        PosStock = b"POSSTOCK",
        PosMf = b"POSMF",
        PosDebt = b"POSDEBT",
        PosOpt = b"POSOPT",
        PosOther = b"POSOTHER",
        InvPos = b"INVPOS",
        InvBal = b"INVBAL",
        SecList = b"SECLIST",
        StockInfo = b"STOCKINFO",
        MfInfo = b"MFINFO",
        DebtInfo = b"DEBTINFO",
        OptInfo = b"OPTINFO",
        OtherInfo = b"OTHERINFO",
        SecInfo = b"SECINFO",
        InvOoList = b"INVOOLIST",
        Inv401k = b"INV401K",
        Inv401kBal = b"INV401KBAL",
        MfAssetClass = b"MFASSETCLASS",
        FiMfAssetClass = b"FIMFASSETCLASS",
        Portion = b"PORTION",
        FiPortion = b"FIPORTION",
    }
    flexible {
        Payee = b"PAYEE",
        Currency = b"CURRENCY",
        OrigCurrency = b"ORIGCURRENCY",
    }
    leaves {
        Code = b"CODE",
        Severity = b"SEVERITY",
        Message = b"MESSAGE",
        DtServer = b"DTSERVER",
        DtProfUp = b"DTPROFUP",
        DtAcctUp = b"DTACCTUP",
        Language = b"LANGUAGE",
        Org = b"ORG",
        Fid = b"FID",
        SessCookie = b"SESSCOOKIE",
        TrnUid = b"TRNUID",
        CltCookie = b"CLTCOOKIE",
        CurDef = b"CURDEF",
        BankId = b"BANKID",
        BranchId = b"BRANCHID",
        AcctId = b"ACCTID",
        AcctType = b"ACCTTYPE",
        AcctKey = b"ACCTKEY",
        BrokerId = b"BROKERID",
        DtStart = b"DTSTART",
        DtEnd = b"DTEND",
        TrnType = b"TRNTYPE",
        DtPosted = b"DTPOSTED",
        DtUser = b"DTUSER",
        DtAvail = b"DTAVAIL",
        TrnAmt = b"TRNAMT",
        FitId = b"FITID",
        SrvrTid = b"SRVRTID",
        CorrectFitId = b"CORRECTFITID",
        CorrectAction = b"CORRECTACTION",
        CheckNum = b"CHECKNUM",
        RefNum = b"REFNUM",
        Sic = b"SIC",
        PayeeId = b"PAYEEID",
        Name = b"NAME",
        ExtdName = b"EXTDNAME",
        Memo = b"MEMO",
        CurSym = b"CURSYM",
        CurRate = b"CURRATE",
        BalAmt = b"BALAMT",
        DtAsOf = b"DTASOF",
        MktgInfo = b"MKTGINFO",
        DtTrade = b"DTTRADE",
        DtSettle = b"DTSETTLE",
        UniqueId = b"UNIQUEID",
        UniqueIdType = b"UNIQUEIDTYPE",
        Units = b"UNITS",
        UnitPrice = b"UNITPRICE",
        Markup = b"MARKUP",
        Markdown = b"MARKDOWN",
        Commission = b"COMMISSION",
        Taxes = b"TAXES",
        Fees = b"FEES",
        Load = b"LOAD",
        Withholding = b"WITHHOLDING",
        TaxExempt = b"TAXEXEMPT",
        Gain = b"GAIN",
        Total = b"TOTAL",
        IncomeType = b"INCOMETYPE",
        BuyType = b"BUYTYPE",
        SellType = b"SELLTYPE",
        OptBuyType = b"OPTBUYTYPE",
        OptSellType = b"OPTSELLTYPE",
        ShPerCtrct = b"SHPERCTRCT",
        TferAction = b"TFERACTION",
        SubAcctSec = b"SUBACCTSEC",
        SubAcctFund = b"SUBACCTFUND",
        HeldInAcct = b"HELDINACCT",
        PosType = b"POSTYPE",
        MktVal = b"MKTVAL",
        DtPriceAsOf = b"DTPRICEASOF",
        AvailCash = b"AVAILCASH",
        MarginBalance = b"MARGINBALANCE",
        ShortBalance = b"SHORTBALANCE",
        BuyPower = b"BUYPOWER",
        SecName = b"SECNAME",
        Ticker = b"TICKER",
        Fiid = b"FIID",
        Rating = b"RATING",
        Yield = b"YIELD",
        AssetClass = b"ASSETCLASS",
        MfType = b"MFTYPE",
        StockType = b"STOCKTYPE",
    }
}

#[cfg(test)]
mod tests {
    use super::Tag;

    #[test]
    fn lookup_is_case_insensitive_and_classifies() {
        assert_eq!(Tag::from_name(b"STMTTRN"), Tag::StmtTrn);
        assert_eq!(Tag::from_name(b"stmttrn"), Tag::StmtTrn);
        assert_eq!(Tag::from_name(b"INTU.BID"), Tag::Other);
        assert_eq!(Tag::from_name(&[b'A'; 100]), Tag::Other);
        assert!(Tag::StmtTrn.is_aggregate() && !Tag::StmtTrn.is_leaf());
        assert!(Tag::Memo.is_leaf() && !Tag::Memo.is_aggregate());
        assert!(!Tag::Other.is_leaf() && !Tag::Other.is_aggregate());
        assert_eq!(Tag::CcStmtTrnRs.name(), "CCSTMTTRNRS");
    }
}
